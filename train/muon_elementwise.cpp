#include "train/muon_elementwise.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <type_traits>

#include "model/kernels/element_io.h"
#include "model/kernels/row_chunks.h"

namespace tinylm {
namespace {

// Row i of the matrix: its momentum updated, its blend's squares summed (in double: the sum
// of up to 10^5 squares keeps float32's digits), the blend itself written to `u`.
TINYLM_CPU_CLONES double blend_row(const float* g, float* m, float mu, int64_t n, float* u) {
  double squares = 0.0;
#pragma omp simd reduction(+ : squares)
  for (int64_t j = 0; j < n; ++j) {
    m[j] = mu * m[j] + g[j];
    u[j] = g[j] + mu * m[j];
    squares += static_cast<double>(u[j]) * u[j];
  }
  return squares;
}

// The transposes below go a band of kBand rows (or columns) of the matrix at a time, so that
// each write is a run of kBand elements and the band's other side stays in L1: element by
// element, the writes of one of U's rows went to as many cache lines (1 KiB apart for the
// default gate-and-up matrix in bfloat16), and the cast took 2.5% of a training run's samples.
constexpr int64_t kBand = 16;

template <class X>
TINYLM_CPU_CLONES void scale_into(const float* u, float scale, MuonMatrixShape s, X* x) {
  if (!s.transposed()) {
#pragma omp simd
    for (int64_t i = 0; i < s.rows * s.cols; ++i) store(x[i], u[i] * scale);
    return;
  }
  for (int64_t i0 = 0; i0 < s.rows; i0 += kBand) {  // X = U^T: column i of X is row i of U
    const int64_t band = std::min(kBand, s.rows - i0);
    for (int64_t j = 0; j < s.cols; ++j)
      for (int64_t i = i0; i < i0 + band; ++i) store(x[j * s.rows + i], u[i * s.cols + j] * scale);
  }
}

template <class X>
TINYLM_CPU_CLONES void update(const X* x, float* w, float decay, float step, MuonMatrixShape s) {
  if (!s.transposed()) {
#pragma omp simd
    for (int64_t i = 0; i < s.rows * s.cols; ++i) w[i] = decay * w[i] + step * widen(x[i]);
    return;
  }
  for (int64_t j0 = 0; j0 < s.cols; j0 += kBand) {
    const int64_t band = std::min(kBand, s.cols - j0);
    for (int64_t i = 0; i < s.rows; ++i)
      for (int64_t j = j0; j < j0 + band; ++j)
        w[i * s.cols + j] = decay * w[i * s.cols + j] + step * widen(x[j * s.rows + i]);
  }
}

}  // namespace

template <class X>
void muon_start(const float* g, float* m, float mu, MuonMatrixShape shape, X* x) {
  // The blend U is written where X goes when X is float32 in the matrix's layout; otherwise
  // to a float32 scratch first, since U's norm comes before X's transpose or rounding.
  const int64_t count = shape.rows * shape.cols;
  std::unique_ptr<float[]> scratch;
  float* u = nullptr;
  if constexpr (std::is_same_v<X, float>) u = shape.transposed() ? nullptr : x;
  if (u == nullptr) {
    scratch.reset(new float[count]);  // uninitialised: every element is written
    u = scratch.get();
  }
  double squares = 0.0;
  for (int64_t i = 0; i < shape.rows; ++i)
    squares +=
        blend_row(g + i * shape.cols, m + i * shape.cols, mu, shape.cols, u + i * shape.cols);
  const float scale = static_cast<float>(1.0 / (std::sqrt(squares) + kMuonNormEpsilon));
  scale_into(u, scale, shape, x);
}

template <class X>
void muon_finish(const X* x, float* w, float decay, float step, MuonMatrixShape shape) {
  update(x, w, decay, step, shape);
}

template <class X>
TINYLM_CPU_CLONES void scaled_copy(const X* in, X* out, int64_t size, float scale) {
#pragma omp simd
  for (int64_t i = 0; i < size; ++i) store(out[i], scale * widen(in[i]));
}

template <class X>
void quintic_factor(const X* a, X* c, int64_t count, int64_t n, float b_coef, float c_coef) {
  scaled_copy(a, c, count * n * n, c_coef);
  for (int64_t d = 0; d < count * n; ++d) {  // matrix d / n's diagonal element d % n
    const int64_t at = d * n + d % n;
    store(c[at], c_coef * widen(a[at]) + b_coef);
  }
}

template <class X>
void add_to_diagonal(X* m, int64_t count, int64_t n, float value) {
  for (int64_t d = 0; d < count * n; ++d) {
    const int64_t at = d * n + d % n;
    store(m[at], widen(m[at]) + value);
  }
}

template void quintic_factor<float>(const float*, float*, int64_t, int64_t, float, float);
template void quintic_factor<c10::BFloat16>(const c10::BFloat16*, c10::BFloat16*, int64_t, int64_t,
                                            float, float);
template void add_to_diagonal<float>(float*, int64_t, int64_t, float);
template void add_to_diagonal<c10::BFloat16>(c10::BFloat16*, int64_t, int64_t, float);
template void muon_start<float>(const float*, float*, float, MuonMatrixShape, float*);
template void muon_start<c10::BFloat16>(const float*, float*, float, MuonMatrixShape,
                                        c10::BFloat16*);
template void muon_finish<float>(const float*, float*, float, float, MuonMatrixShape);
template void muon_finish<c10::BFloat16>(const c10::BFloat16*, float*, float, float,
                                         MuonMatrixShape);

}  // namespace tinylm
