#include "model/kernels/matrix_vector.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <stdexcept>

namespace tinylm {
namespace {

// Rows [begin, end), one dot product each, summed in float as sgemv does, in the order the
// vector units take them (-ffast-math lets the compiler reassociate). One row at a time
// streams W in order: four rows sharing each load of x ran at half the speed (more streams
// than the prefetchers follow, on the EPYC of docs/MEASUREMENTS.md). Inlined into each
// build below, where the compiler vectorises it for that build's instructions.
__attribute__((always_inline)) inline void rows_times(const float* W, int64_t begin, int64_t end,
                                                      int64_t in, const float* x, const float* bias,
                                                      float* y) {
  for (int64_t o = begin; o < end; ++o) {
    const float* w = W + o * in;
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int64_t i = 0; i < in; ++i) s += w[i] * x[i];
    y[o] = s + (bias ? bias[o] : 0.0f);
  }
}

#if defined(__x86_64__)
__attribute__((target("avx512f,avx512vl,fma"))) void rows_avx512(const float* W, int64_t begin,
                                                                 int64_t end, int64_t in,
                                                                 const float* x, const float* bias,
                                                                 float* y) {
  rows_times(W, begin, end, in, x, bias, y);
}

__attribute__((target("avx2,fma"))) void rows_avx2(const float* W, int64_t begin, int64_t end,
                                                   int64_t in, const float* x, const float* bias,
                                                   float* y) {
  rows_times(W, begin, end, in, x, bias, y);
}
#endif

void rows_baseline(const float* W, int64_t begin, int64_t end, int64_t in, const float* x,
                   const float* bias, float* y) {
  rows_times(W, begin, end, in, x, bias, y);
}

}  // namespace

void matrix_vector(const float* W, int64_t out, int64_t in, const float* x, const float* bias,
                   float* y, std::optional<VectorIsa> isa) {
  if (isa && !cpu_runs(*isa)) {
    throw std::invalid_argument("matrix_vector: this CPU cannot run that build");
  }
  const VectorIsa use = isa.value_or(widest_vector_isa());
  auto rows = rows_baseline;
#if defined(__x86_64__)
  if (use == VectorIsa::kAvx512) rows = rows_avx512;
  if (use == VectorIsa::kAvx2) rows = rows_avx2;
#endif
  // A grain of about 64 K multiply-adds per task: small matrices stay on one thread.
  const int64_t grain = std::max<int64_t>(4, (int64_t{1} << 16) / std::max<int64_t>(in, 1));
  at::parallel_for(0, out, grain,
                   [&](int64_t begin, int64_t end) { rows(W, begin, end, in, x, bias, y); });
}

}  // namespace tinylm
