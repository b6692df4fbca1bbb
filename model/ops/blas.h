#pragma once
// The Fortran BLAS routines that LibTorch itself links (OpenBLAS here), for the few places
// that call them directly: column-major, arguments by pointer.

#include <algorithm>
#include <climits>
#include <cstdint>
#include <optional>
#include <type_traits>

extern "C" {
void sgemm_(const char* transa, const char* transb, const int* m, const int* n, const int* k,
            const float* alpha, const float* a, const int* lda, const float* b, const int* ldb,
            const float* beta, float* c, const int* ldc);
void dgemm_(const char* transa, const char* transb, const int* m, const int* n, const int* k,
            const double* alpha, const double* a, const int* lda, const double* b, const int* ldb,
            const double* beta, double* c, const int* ldc);
void ssyrk_(const char* uplo, const char* trans, const int* n, const int* k, const float* alpha,
            const float* a, const int* lda, const float* beta, float* c, const int* ldc);
void sgemv_(const char* trans, const int* m, const int* n, const float* alpha, const float* a,
            const int* lda, const float* x, const int* incx, const float* beta, float* y,
            const int* incy);
}

namespace tinylm {

// A row-major matrix (rows, cols) with strides (row_stride, col_stride) as the BLAS reads it:
// its rows contiguous (transposed = false) or its columns (true: the transpose of a row-major
// matrix), `ld` apart; nullopt where it is neither, or ld is past int's range. A stride of a
// side of 1 is arbitrary in LibTorch, so such a side fits either way.
struct BlasLayout {
  bool transposed;
  int ld;
};
inline std::optional<BlasLayout> blas_layout(int64_t rows, int64_t cols, int64_t row_stride,
                                             int64_t col_stride) {
  const auto fits = [](int64_t ld, int64_t line) {
    return ld >= std::max<int64_t>(line, 1) && ld <= INT_MAX;
  };
  if (cols <= 1 || col_stride == 1) {  // rows contiguous, row_stride apart
    const int64_t ld = rows <= 1 ? std::max<int64_t>(cols, 1) : row_stride;
    if (fits(ld, cols)) return BlasLayout{false, static_cast<int>(ld)};
  }
  if (rows <= 1 || row_stride == 1) {  // columns contiguous, col_stride apart
    const int64_t ld = cols <= 1 ? std::max<int64_t>(rows, 1) : col_stride;
    if (fits(ld, rows)) return BlasLayout{true, static_cast<int>(ld)};
  }
  return std::nullopt;
}

// Row-major C (m, n) = alpha op(A) op(B) + beta C, op(A) (m, k) and op(B) (k, n); A is
// stored (k, m) when trans_a, B (k, n) unless trans_b; ld* are row strides. Row-major C is
// column-major C^T = op(B)^T op(A)^T, hence B first.
template <class T>
void gemm_row_major(bool trans_a, bool trans_b, int m, int n, int k, T alpha, const T* a, int lda,
                    const T* b, int ldb, T beta, T* c, int ldc) {
  const char ta = trans_a ? 'T' : 'N', tb = trans_b ? 'T' : 'N';
  if constexpr (std::is_same_v<T, float>) {
    sgemm_(&tb, &ta, &n, &m, &k, &alpha, b, &ldb, a, &lda, &beta, c, &ldc);
  } else {
    dgemm_(&tb, &ta, &n, &m, &k, &alpha, b, &ldb, a, &lda, &beta, c, &ldc);
  }
}
// Row-major C (n, n) = alpha A A^T + beta C for A (n, k), written in C's lower triangle only
// (the upper is left as it was): syrk does half of gemm's multiply-adds, and ran 1.6x its
// speed at Newton-Schulz's shapes (docs/MEASUREMENTS.md). The row-major lower triangle is
// the column-major upper one, of A^T's column-major view transposed.
inline void syrk_lower_row_major(int n, int k, float alpha, const float* a, int lda, float beta,
                                 float* c, int ldc) {
  const char uplo = 'U', trans = 'T';
  ssyrk_(&uplo, &trans, &n, &k, &alpha, a, &lda, &beta, c, &ldc);
}

// Up to this many rows a product with a weight matrix runs as matrix-vector products
// (model/kernels/matrix_vector.h): sgemm copies ("packs") the whole weight on every call,
// which at one row costs several times the product itself; from two rows on one sgemm was
// as fast as a loop of sgemv (docs/MEASUREMENTS.md; measured before tinylm had its own
// matrix-vector loop).
inline constexpr long kMaxMatrixVectorRows = 1;
}  // namespace tinylm
