#include "model/kernels/tile_gemm.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "model/kernels/row_chunks.h"

namespace tinylm {
namespace {

#define TINYLM_INLINE inline __attribute__((always_inline))

template <class T>
struct Operands {
  int k;
  T alpha;
  const T* a;
  int64_t a_row, a_col;
  const T* b;
  int64_t ldb;
  T beta;
  T* c;
  int64_t ldc;
};

// C's block (Rows, Cols) at (i, j), each of its rows in Cols / Lanes GCC vectors of Lanes
// elements, Lanes the build's register width (Cols for a block narrower than that): a vector
// wider than the build's registers is not split into them but goes through the stack element
// by element, which made the AVX2 build run these products at 11-16 GFLOP/s, a tenth of the
// AVX-512 build's. B's row is loaded once per p and multiplied by each row's element of A.
// Each element's sum runs over p in order whatever the block's shape, so the blocking does
// not change a bit of the result.
template <int Rows, int Cols, int RegisterBytes, class T>
TINYLM_INLINE void block(const Operands<T>& o, int i, int j) {
  constexpr int Lanes = std::min<int>(Cols, RegisterBytes / sizeof(T)), N = Cols / Lanes;
  typedef T Vec __attribute__((vector_size(Lanes * sizeof(T))));
  Vec acc[Rows][N] = {};
  const T* a = o.a + i * o.a_row;
  const T* b = o.b + j;
  for (int p = 0; p < o.k; ++p) {
    for (int v = 0; v < N; ++v) {
      Vec bp;
      std::memcpy(&bp, b + p * o.ldb + v * Lanes, sizeof bp);
      for (int r = 0; r < Rows; ++r) acc[r][v] += a[r * o.a_row + p * o.a_col] * bp;
    }
  }
  T* c = o.c + i * o.ldc + j;
  for (int r = 0; r < Rows; ++r) {
    for (int v = 0; v < N; ++v) {
      Vec out = o.alpha * acc[r][v];
      if (o.beta != T(0)) {
        Vec old;
        std::memcpy(&old, c + r * o.ldc + v * Lanes, sizeof old);
        out += o.beta * old;
      }
      std::memcpy(c + r * o.ldc + v * Lanes, &out, sizeof out);
    }
  }
}

// The last `left` (< 2 Rows) rows of a column block, in blocks of Rows, Rows / 2, ..., 1
// (13 = 8 + 4 + 1): a block for every count below 8 made the kernels' unit take a third
// longer to compile.
template <int Rows, int Cols, int RegisterBytes, class T>
TINYLM_INLINE void last_rows(const Operands<T>& o, int i, int j, int left) {
  if constexpr (Rows > 0) {
    if (left >= Rows) {
      block<Rows, Cols, RegisterBytes>(o, i, j);
      i += Rows, left -= Rows;
    }
    last_rows<Rows / 2, Cols, RegisterBytes>(o, i, j, left);
  }
}

// One block of columns `Cols` wide down all of C's rows: Rows at a time, then the rest.
template <int Rows, int Cols, int RegisterBytes, class T>
TINYLM_INLINE void column_block(const Operands<T>& o, int m, int j) {
  int i = 0;
  for (; i + Rows <= m; i += Rows) block<Rows, Cols, RegisterBytes>(o, i, j);
  last_rows<Rows / 2, Cols, RegisterBytes>(o, i, j, m - i);
}

// C's columns in blocks of 16, the rest in halving widths (24 = 16 + 8), so that every block
// has a width known to the compiler; Rows of them at a time, RegisterBytes the build's
// vector registers. Rows x 16 accumulators stay in registers, each register a chain of
// dependent multiply-adds: there must be enough chains to keep the multiply-add pipes busy
// while each waits on its last result, and few enough to leave registers for B's row.
// Inlined into each build.
template <int Rows, int RegisterBytes, class T>
TINYLM_INLINE void all_columns(const Operands<T>& o, int m, int n) {
  constexpr int kCols = 16;
  int j = 0;
  for (; j + kCols <= n; j += kCols) column_block<Rows, kCols, RegisterBytes>(o, m, j);
  for (int width = kCols / 2; width >= 1; width /= 2) {
    if (j + width > n) continue;
    switch (width) {
      case 8: column_block<Rows, 8, RegisterBytes>(o, m, j); break;
      case 4: column_block<Rows, 4, RegisterBytes>(o, m, j); break;
      case 2: column_block<Rows, 2, RegisterBytes>(o, m, j); break;
      default: column_block<Rows, 1, RegisterBytes>(o, m, j); break;
    }
    j += width;
  }
}

#if defined(__x86_64__)
// 8 rows: 8 chains in 8 of the 32 AVX-512 registers. With 4 the two pipes ran half idle: the
// products of attention's default shapes took 1.1-1.3x as long. 12 and 16 rows were slower
// again (docs/MEASUREMENTS.md, round thirteen).
template <class T>
__attribute__((target("avx512f,avx512vl,fma"))) void columns_avx512(const Operands<T>& o, int m,
                                                                    int n) {
  all_columns<8, 64>(o, m, n);
}

// 4 rows: 8 chains (two registers a row) in 8 of the 16 AVX2 registers; 6 rows (12) were
// slower.
template <class T>
__attribute__((target("avx2,fma"))) void columns_avx2(const Operands<T>& o, int m, int n) {
  all_columns<4, 32>(o, m, n);
}
#endif

// 2 rows: 8 chains in 8 of the 16 SSE registers (or NEON's 32).
template <class T>
void columns_baseline(const Operands<T>& o, int m, int n) {
  all_columns<2, 16>(o, m, n);
}

}  // namespace

template <class T>
void tile_gemm(int m, int n, int k, T alpha, const T* a, int64_t a_row, int64_t a_col, const T* b,
               int64_t ldb, T beta, T* c, int64_t ldc, std::optional<VectorIsa> isa) {
  if (isa && !cpu_runs(*isa))
    throw std::invalid_argument("tile_gemm: this CPU cannot run that build");
  const Operands<T> o{k, alpha, a, a_row, a_col, b, ldb, beta, c, ldc};
  switch (isa.value_or(widest_vector_isa())) {
#if defined(__x86_64__)
    case VectorIsa::kAvx512: return columns_avx512(o, m, n);
    case VectorIsa::kAvx2: return columns_avx2(o, m, n);
#endif
    default: return columns_baseline(o, m, n);
  }
}

// A band of 16 of B's rows at a time: each write a run of 16 elements (a cache line of
// floats), the band's rows in L1 while it is read down. Row by row, each of B's rows went to
// `cols` cache lines a row's width apart, and the transposes of K and V took 1.5-2% of a
// training run's samples, nearly all of it on the stores. The run is one vector gathered from
// the band's rows (a clone per CPU): element by element it was a scalar loop, 2x the time.
template <class T>
TINYLM_CPU_CLONES void transpose_into(const T* b, int64_t ld, int rows, int cols, T* out) {
  constexpr int kBand = 16;
  for (int i0 = 0; i0 < rows; i0 += kBand) {
    const int band_end = std::min(rows, i0 + kBand);
    for (int j = 0; j < cols; ++j) {
      T* column = out + j * rows;
      const T* in = b + j;
#pragma omp simd
      for (int i = i0; i < band_end; ++i) column[i] = in[i * ld];
    }
  }
}

template void tile_gemm<float>(int, int, int, float, const float*, int64_t, int64_t, const float*,
                               int64_t, float, float*, int64_t, std::optional<VectorIsa>);
template void tile_gemm<double>(int, int, int, double, const double*, int64_t, int64_t,
                                const double*, int64_t, double, double*, int64_t,
                                std::optional<VectorIsa>);
template void transpose_into<float>(const float*, int64_t, int, int, float*);
template void transpose_into<double>(const double*, int64_t, int, int, double*);

}  // namespace tinylm
