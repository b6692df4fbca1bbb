#include "train/muon.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>
#include <set>
#include <stdexcept>
#include <string>

#include "model/ops/blas.h"
#include "model/ops/onednn_matmul.h"
#include "train/muon_elementwise.h"
#include "train/precision.h"
#include "train/work_lists.h"

namespace tinylm {

bool bfloat16_products_sum_in_float32() {
  static const bool avx512 = [] {
    const std::set<std::string> flags = cpu_flags();
    return flags.count("avx512bw") && flags.count("avx512vl") && flags.count("avx512dq");
  }();
  return avx512 && at::globalContext().userEnabledMkldnn();
}

namespace {

// The schedule's first `steps` steps on a batch x (count, rows, cols), rows <= cols.
torch::Tensor iterate(torch::Tensor x, int steps) {
  for (int i = 0; i < steps; ++i) {
    const Quintic& q = kNewtonSchulzSchedule[i];
    const torch::Tensor A = torch::bmm(x, x.transpose(-2, -1));
    const torch::Tensor B = torch::baddbmm(A, A, A, q.b, q.c);  // b A + c A A
    x = torch::baddbmm(x, B, x, q.a, 1.0);                      // a X + B X
  }
  return x;
}

// Bytes of one contiguous tensor into another of its size.
void copy_into(const torch::Tensor& from, torch::Tensor& to) {
  std::memcpy(to.data_ptr(), from.data_ptr(), from.nbytes());
}

// f(x's elements): float32 or bfloat16, the types an iterate has (iteration_dtype).
template <class F>
void with_iterate_type(const torch::Tensor& x, const F& f) {
  if (x.scalar_type() == torch::kBFloat16) return f(x.data_ptr<c10::BFloat16>());
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "muon: cannot iterate in ", x.scalar_type());
  f(x.data_ptr<float>());
}

// P = a I + b A + c A A for a batch of symmetric n x n A, as A (c A + b I) + a I: the factor
// and the diagonal are passes over n x n elements (muon_elementwise.h), the product one oneDNN
// call with no scales. A product's scales are its primitive's, made and JIT-compiled for them:
// with coefficients of their own each step, 4 steps made 4x the kernels, and in a training run
// they took as long as 5 steps of one quintic (cold code; docs/MEASUREMENTS.md, round eighteen).
void quintic_onednn(const torch::Tensor& A, torch::Tensor& factor, torch::Tensor& P,
                    const Quintic& q) {
  const int64_t count = A.size(0), n = A.size(1);
  with_iterate_type(A, [&](auto* a) {
    using X = std::remove_pointer_t<decltype(a)>;
    quintic_factor(a, factor.data_ptr<X>(), count, n, static_cast<float>(q.b),
                   static_cast<float>(q.c));
  });
  onednn_matmul(A, factor, {}, P);
  with_iterate_type(P, [&](auto* p) { add_to_diagonal(p, count, n, static_cast<float>(q.a)); });
}

// The same steps on a bfloat16 or float32 CPU batch through oneDNN's own API (model/ops/
// onednn_matmul.h), each product one call: LibTorch's bmm and baddbmm reach the same kernels
// with about 10 us of wrapping a call. Per step A = X X^T, P (quintic_onednn), X <- P X.
torch::Tensor iterate_onednn(torch::Tensor x, int steps) {
  x = x.contiguous();
  const int64_t count = x.size(0), n = x.size(1);
  torch::Tensor A = torch::empty({count, n, n}, x.options()), factor = torch::empty_like(A),
                P = torch::empty_like(A);
  torch::Tensor next = torch::empty_like(x);
  for (int i = 0; i < steps; ++i) {
    onednn_matmul(x, x.transpose(-2, -1), {}, A);
    quintic_onednn(A, factor, P, kNewtonSchulzSchedule[i]);
    onednn_matmul(P, x, {}, next);
    std::swap(x, next);
  }
  return x;
}

// Row-major n x n products on one thread, for the two float32 iterations below. A product
// that is symmetric (S S^T) is one syrk, half a gemm's multiply-adds (1.6x a gemm's speed
// at these shapes in OpenBLAS), its lower triangle mirrored to full.
struct SquareProducts {
  int n;
  void mirror_lower(float* s) const {
    for (int i = 0; i < n; ++i)
      for (int j = i + 1; j < n; ++j) s[i * n + j] = s[j * n + i];
  }
  // out = a I + b S + c S S for a symmetric S: the step's polynomial.
  void quintic(const Quintic& q, const float* S, float* out) const {
    std::copy(S, S + n * n, out);
    syrk_lower_row_major(n, n, static_cast<float>(q.c), S, n, static_cast<float>(q.b), out, n);
    mirror_lower(out);
    for (int d = 0; d < n; ++d) out[d * n + d] += static_cast<float>(q.a);
  }
  void square(const float* S, float* out) const {  // S S^T
    syrk_lower_row_major(n, n, 1.0f, S, n, 0.0f, out, n);
    mirror_lower(out);
  }
  void times(const float* L, const float* R, float* out) const {  // L R
    gemm_row_major<float>(false, false, n, n, n, 1.0f, L, n, R, n, 0.0f, out, n);
  }
};

// The steps on one contiguous float32 CPU matrix x (n, m), n <= m, in place, each as written:
// A = X X^T (syrk), P = a I + b A + c A A (syrk), X <- P X (gemm).
void iterate_directly(torch::Tensor x, int steps) {
  const int n = static_cast<int>(x.size(0)), m = static_cast<int>(x.size(1));
  const SquareProducts square{n};
  torch::Tensor gram = torch::empty({n, n}), poly = torch::empty({n, n}),
                spare = torch::empty_like(x);
  float *A = gram.data_ptr<float>(), *P = poly.data_ptr<float>();
  float *X = x.data_ptr<float>(), *next = spare.data_ptr<float>();
  for (int i = 0; i < steps; ++i) {
    syrk_lower_row_major(n, m, 1.0f, X, m, 0.0f, A, n);
    square.mirror_lower(A);
    square.quintic(kNewtonSchulzSchedule[i], A, P);
    gemm_row_major<float>(false, false, n, m, n, 1.0f, P, n, X, m, 0.0f, next, m);
    std::swap(X, next);
  }
  if (X != x.data_ptr<float>()) x.copy_(spare);
}

// The same result through n x n products only. Every P_k is a polynomial in G = X0 X0^T, so
// they commute: X_k = Q_k X0 with Q_k = P_{k-1} ... P_0, and A_{k+1} = X_{k+1} X_{k+1}^T =
// P_k A_k P_k = P_k^2 A_k. Only G and the last Q X0 touch the m-wide X. Q's norm grows
// up to the product of the steps' a (their largest gain, at small singular values), and
// rounding in Q with it (measured with Keller Jordan's quintic): about 1e-4 relative against 5e-6
// for the direct steps, where the singular values spread over four decades (float64 reference) --
// bfloat16's iteration is 1.6e-2 off.
void iterate_through_gram(torch::Tensor x, int steps) {
  const int n = static_cast<int>(x.size(0)), m = static_cast<int>(x.size(1));
  const SquareProducts square{n};
  torch::Tensor squares = torch::empty({6, n, n}), product = torch::empty_like(x);
  float* base = squares.data_ptr<float>();
  float *A = base, *A_next = base + n * n, *P = base + 2 * n * n, *P2 = base + 3 * n * n;
  float *Q = base + 4 * n * n, *Q_next = base + 5 * n * n;
  syrk_lower_row_major(n, m, 1.0f, x.data_ptr<float>(), m, 0.0f, A, n);
  square.mirror_lower(A);
  for (int k = 0; k < steps; ++k) {
    square.quintic(kNewtonSchulzSchedule[k], A, P);
    if (k == 0) {
      std::copy(P, P + n * n, Q);
    } else {
      square.times(P, Q, Q_next);
      std::swap(Q, Q_next);
    }
    if (k + 1 < steps) {
      square.square(P, P2);
      square.times(P2, A, A_next);  // symmetric up to rounding, as the next syrk takes it
      std::swap(A, A_next);
    }
  }
  gemm_row_major<float>(false, false, n, m, n, 1.0f, Q, n, x.data_ptr<float>(), m, 0.0f,
                        product.data_ptr<float>(), m);
  x.copy_(product);
}

// The Gram route of iterate_through_gram on a float32 CPU batch (count, n, m) through oneDNN,
// every product a whole one (oneDNN has no syrk): G = X0 X0^T, then per step P (quintic_onednn),
// Q <- P Q and A <- P^2 A, and X0 once more for Q X0. Float32 only: Q's norm reaches the
// product of the steps' a, and bfloat16's rounding of it (2^-8 of that) would swamp the result.
torch::Tensor iterate_onednn_through_gram(torch::Tensor x, int steps) {
  x = x.contiguous();
  const int64_t count = x.size(0), n = x.size(1);
  const auto square = [&] { return torch::empty({count, n, n}, x.options()); };
  torch::Tensor A = square(), P = square(), P2 = square(), Q = square(), spare = square();
  onednn_matmul(x, x.transpose(-2, -1), {}, A);
  for (int k = 0; k < steps; ++k) {
    quintic_onednn(A, spare, P, kNewtonSchulzSchedule[k]);
    if (k == 0) {
      copy_into(P, Q);
    } else {
      onednn_matmul(P, Q, {}, spare);
      std::swap(Q, spare);
    }
    if (k + 1 < steps) {
      onednn_matmul(P, P, {}, P2);
      onednn_matmul(P2, A, {}, spare);
      std::swap(A, spare);
    }
  }
  torch::Tensor out = torch::empty_like(x);
  onednn_matmul(Q, x, {}, out);
  return out;
}

// Multiply-adds of `steps` steps on a matrix with sides n <= m (syrk counted as half a gemm):
// per direct step n^2 m / 2 + n^3 / 2 + n^2 m; through G, n^2 m / 2 and n^2 m once, and per
// step at most 3 n^3 (first and last less).
double direct_multiply_adds(double n, double m, int steps) {
  return steps * (1.5 * n * n * m + 0.5 * n * n * n);
}
double gram_multiply_adds(double n, double m, int steps) {
  return 1.5 * n * n * m + (3.0 * steps - 2.5) * n * n * n;
}
// The same through oneDNN, whose products are all whole gemms: per direct step 2 n^2 m + n^3;
// through G, 2 n^2 m once and 4 n^3 a step (the first step and the last less).
double onednn_direct_multiply_adds(double n, double m, int steps) {
  return steps * (2 * n * n * m + n * n * n);
}
double onednn_gram_multiply_adds(double n, double m, int steps) {
  return 2 * n * n * m + (4.0 * steps - 3) * n * n * n;
}

// Whether float32 iterates through oneDNN here: where its float32 kernels are AVX-512's (model/
// ops/onednn_matmul.h), unless the user turned oneDNN off (as LibTorch's own products
// take it). The default model's matrices on one thread: 0.58-0.59 of BLAS's time with the Haswell
// kernels (docs/MEASUREMENTS.md, round fifteen); on an AVX2-only CPU oneDNN's float32 kernel is
// no faster than BLAS, and syrk halves the symmetric products (X X^T, A A) there.
bool float32_on_onednn() {
  return onednn_float32_beats_blas() && at::globalContext().userEnabledMkldnn();
}

}  // namespace

bool newton_schulz_through_gram(int64_t rows, int64_t cols, int steps, bool own_thread) {
  const double n = static_cast<double>(std::min(rows, cols));
  const double m = static_cast<double>(std::max(rows, cols));
  if (steps < 2) return false;
  if (float32_on_onednn())
    return onednn_gram_multiply_adds(n, m, steps) < onednn_direct_multiply_adds(n, m, steps);
  return own_thread && gram_multiply_adds(n, m, steps) < direct_multiply_adds(n, m, steps);
}

namespace {

// The dtype a batch of matrices (count, rows, cols) iterates in, asked for `dtype`. LibTorch
// 1.13 hands a bfloat16 product to oneDNN only past 16 x 16 x 16 multiply-adds, counting
// the batch; a smaller one takes its own GEMM, which sums in bfloat16 (a 16-wide matrix alone
// came out 0.09 from float64 instead of 0.016). At that size float32 is free.
torch::ScalarType iteration_dtype(const torch::Tensor& batch, torch::ScalarType dtype) {
  const int64_t side = std::min(batch.size(-2), batch.size(-1));
  if (dtype == torch::kBFloat16 && batch.is_cpu() &&
      (!bfloat16_products_sum_in_float32() || side * side * side <= 16 * 16 * 16))
    return torch::kFloat32;
  return dtype;
}

// A batch (count, n, m) ready for the iteration: n <= m, in the dtype it iterates in, each
// matrix scaled to norm 1; and whether the caller's matrices are (m, n), x their transposes.
struct Prepared {
  torch::Tensor x;
  bool tall;
};

Prepared prepare(const torch::Tensor& g, torch::ScalarType dtype) {
  Prepared p{g, g.size(-2) > g.size(-1)};
  // X X^T is then the smaller Gram matrix; a contiguous X makes its first product 2x faster.
  if (p.tall) p.x = p.x.transpose(-2, -1);
  p.x = p.x.to(iteration_dtype(g, dtype)).contiguous();
  // Each matrix's singular values <= 1: inside the iteration's basin.
  p.x = p.x / (p.x.norm(2, {-2, -1}, /*keepdim=*/true) + kMuonNormEpsilon);
  return p;
}

torch::Tensor finish(const Prepared& p) {
  const torch::Tensor x = p.tall ? p.x.transpose(-2, -1) : p.x;
  return x.to(torch::kFloat32).contiguous();
}

// The matrices of several batches dealt to the threads: longest first to the thread with the
// least work so far (greedy longest-processing-time scheduling), `cost` being one matrix's of
// each batch. Dealing each batch over the threads on its own left threads idle whenever a
// batch did not divide evenly (the default model's batches are 3 matrices each, and on 2
// threads one thread took 2 of every batch while the other waited). Matrices of one batch
// are interchangeable, so a thread's share of a batch is one contiguous range.
struct Share {
  size_t batch;
  int64_t begin, count;
};
std::vector<std::vector<Share>> deal(const std::vector<int64_t>& counts,
                                     const std::vector<double>& cost, int threads) {
  std::vector<size_t> order;  // one entry a matrix: its batch, longest first
  for (size_t b = 0; b < counts.size(); ++b) order.insert(order.end(), counts[b], b);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return cost[a] > cost[b]; });
  std::vector<std::vector<int64_t>> taken(threads, std::vector<int64_t>(counts.size(), 0));
  std::vector<double> load(threads, 0.0);
  for (const size_t b : order) {
    const auto least = std::min_element(load.begin(), load.end()) - load.begin();
    ++taken[least][b];
    load[least] += cost[b];
  }
  std::vector<std::vector<Share>> shares(threads);
  std::vector<int64_t> next(counts.size(), 0);
  for (int t = 0; t < threads; ++t)
    for (size_t b = 0; b < counts.size(); ++b)
      if (taken[t][b] > 0) {
        shares[t].push_back({b, next[b], taken[t][b]});
        next[b] += taken[t][b];
      }
  return shares;
}

// A prepared batch iterated in place. On the CPU through oneDNN's API: bfloat16 where it runs
// bfloat16, float32 where its kernels are AVX-512's (float32_on_onednn), directly or through
// the Gram matrix, whichever is fewer multiply-adds. Otherwise float32 on a thread of its own:
// a matrix at a time, BLAS on one thread, the cheaper of the two iterations above; and
// anything else (bfloat16 elsewhere, or float32 split over the threads) batched products,
// each matrix in one call.
void iterate_prepared(torch::Tensor& x, int steps, bool own_thread) {
  if (x.is_cpu() && x.scalar_type() == torch::kBFloat16 && onednn_bfloat16_runs()) {
    x = iterate_onednn(x, steps);
    return;
  }
  const bool float32_cpu = x.is_cpu() && x.scalar_type() == torch::kFloat32;
  const bool through_gram = newton_schulz_through_gram(x.size(1), x.size(2), steps, own_thread);
  if (float32_cpu && float32_on_onednn()) {
    x = through_gram ? iterate_onednn_through_gram(x, steps) : iterate_onednn(x, steps);
    return;
  }
  if (!(own_thread && float32_cpu)) {
    x = iterate(x, steps);
    return;
  }
  for (int64_t i = 0; i < x.size(0); ++i)
    through_gram ? iterate_through_gram(x[i], steps) : iterate_directly(x[i], steps);
}

// One matrix's multiply-adds in the iteration it takes on its own thread.
double cost_on_own_thread(const torch::Tensor& batch, torch::ScalarType dtype, int steps) {
  const double n = static_cast<double>(std::min(batch.size(1), batch.size(2)));
  const double m = static_cast<double>(std::max(batch.size(1), batch.size(2)));
  if (iteration_dtype(batch, dtype) != torch::kFloat32)
    return onednn_direct_multiply_adds(n, m, steps);  // X X^T, A A and B X
  const bool through_gram = newton_schulz_through_gram(batch.size(1), batch.size(2), steps, true);
  if (float32_on_onednn())
    return through_gram ? onednn_gram_multiply_adds(n, m, steps)
                        : onednn_direct_multiply_adds(n, m, steps);
  return through_gram ? gram_multiply_adds(n, m, steps) : direct_multiply_adds(n, m, steps);
}

// The Newton-Schulz of matrices [begin, begin + count) of batch `batch`: input(share) makes
// their prepared iterate, output(share, p) takes it iterated, both on the thread that
// iterates them, so that what comes before and after the iteration (Muon's momentum and its
// update) runs on the threads too.
using ShareInput = std::function<Prepared(const Share&)>;
using ShareOutput = std::function<void(const Share&, const Prepared&)>;

void newton_schulz_shares(const std::vector<torch::Tensor>& batches, torch::ScalarType dtype,
                          int steps, const ShareInput& input, const ShareOutput& output) {
  const auto run = [&](const Share& share, bool own_thread) {
    torch::NoGradGuard no_grad;  // grad mode is the thread's own
    Prepared p = input(share);
    iterate_prepared(p.x, steps, own_thread);
    output(share, p);
  };
  bool cpu = true;
  for (const torch::Tensor& g : batches) cpu = cpu && g.is_cpu();
  // On the CPU, a thread per matrix: splitting each of these small products over the
  // threads cost more than it gained (the optimizer's time per step fell 1.6x in float32,
  // OpenBLAS, and 1.2x in bfloat16, oneDNN, on 2 threads). With fewer matrices than threads
  // that would leave threads idle, so each product is split over them instead.
  const int threads = at::get_num_threads();
  // Float32 and bfloat16 dealt apart: a multiply-add costs each its own time.
  for (const bool float32 : {true, false}) {
    std::vector<size_t> group;  // the batches iterating in this dtype
    std::vector<int64_t> counts;
    std::vector<double> cost;
    for (size_t b = 0; b < batches.size(); ++b)
      if ((iteration_dtype(batches[b], dtype) == torch::kFloat32) == float32) {
        group.push_back(b);
        counts.push_back(batches[b].size(0));
        cost.push_back(cost_on_own_thread(batches[b], dtype, steps));
      }
    const int64_t matrices = std::accumulate(counts.begin(), counts.end(), int64_t{0});
    if (!(cpu && matrices > 1 && matrices >= threads)) {
      for (size_t i = 0; i < group.size(); ++i) run({group[i], 0, counts[i]}, false);
      continue;
    }
    // Each share whole on one thread, whichever (train/work_lists.h).
    run_work_lists(deal(counts, cost, threads), [&](const Share& share) {
      run({group[share.batch], share.begin, share.count}, true);
    });
  }
}

// A batch as (count, rows, cols): a lone matrix as a batch of one.
torch::Tensor as_batch(const torch::Tensor& g) {
  TORCH_CHECK(g.dim() == 2 || g.dim() == 3,
              "newton_schulz: expected a matrix or a batch of matrices, got ", g.sizes());
  return g.dim() == 2 ? g.unsqueeze(0) : g;
}

torch::Tensor rows_of(const torch::Tensor& batch, const Share& share) {
  return batch.narrow(0, share.begin, share.count);
}

}  // namespace

std::vector<torch::Tensor> newton_schulz(const std::vector<torch::Tensor>& matrices,
                                         torch::ScalarType dtype, int steps) {
  if (steps < 0 || steps > kNewtonSchulzSteps)
    throw std::invalid_argument("newton_schulz: asked for " + std::to_string(steps) +
                                " steps; the schedule has " + std::to_string(kNewtonSchulzSteps));
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> batches, out;
  for (const torch::Tensor& g : matrices) {
    batches.push_back(as_batch(g));
    out.push_back(torch::empty_like(batches.back(), torch::kFloat32));
  }
  newton_schulz_shares(
      batches, dtype, steps,
      [&](const Share& s) { return prepare(rows_of(batches[s.batch], s), dtype); },
      [&](const Share& s, const Prepared& p) { rows_of(out[s.batch], s).copy_(finish(p)); });
  for (size_t b = 0; b < out.size(); ++b)
    if (matrices[b].dim() == 2) out[b] = out[b].squeeze(0);
  return out;
}

torch::Tensor newton_schulz(const torch::Tensor& g, torch::ScalarType dtype, int steps) {
  return newton_schulz(std::vector<torch::Tensor>{g}, dtype, steps)[0];
}

double newton_schulz_flops(int64_t rows, int64_t cols, int steps) {
  const double n = static_cast<double>(std::min(rows, cols)),
               m = static_cast<double>(std::max(rows, cols));
  return steps * (4.0 * n * n * m + 2.0 * n * n * n);
}

void muon_update(const std::vector<MuonMatrices>& batches, double lr, double mu, double decay,
                 torch::ScalarType dtype) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> params, grads, momenta;
  std::vector<double> step;  // -lr, scaled for the matrices' shape
  bool float32_cpu = true;
  for (const MuonMatrices& b : batches) {
    params.push_back(as_batch(b.param));
    grads.push_back(as_batch(b.grad));
    momenta.push_back(as_batch(b.momentum));
    const double rows = static_cast<double>(b.param.size(-2));
    const double cols = static_cast<double>(b.param.size(-1));
    step.push_back(-lr * std::sqrt(std::max(1.0, rows / cols)));
    for (const torch::Tensor& t : {b.param, b.grad, b.momentum})
      float32_cpu =
          float32_cpu && t.is_cpu() && t.scalar_type() == torch::kFloat32 && t.is_contiguous();
  }
  // Each share's momentum, Nesterov blend and update on the thread that iterates it: on the
  // CPU a pass each side of the iteration (train/muon_elementwise.h), elsewhere operators.
  if (float32_cpu) {
    newton_schulz_shares(
        grads, dtype, kNewtonSchulzSteps,
        [&](const Share& s) {
          const torch::Tensor g = rows_of(grads[s.batch], s);
          const MuonMatrixShape shape{g.size(1), g.size(2)};
          const int64_t n = std::min(shape.rows, shape.cols), m = std::max(shape.rows, shape.cols);
          Prepared p{torch::empty({s.count, n, m}, g.options().dtype(iteration_dtype(g, dtype))),
                     shape.transposed()};
          float* momentum = rows_of(momenta[s.batch], s).data_ptr<float>();
          with_iterate_type(p.x, [&](auto* x) {
            for (int64_t i = 0; i < s.count; ++i)
              muon_start(g.data_ptr<float>() + i * n * m, momentum + i * n * m,
                         static_cast<float>(mu), shape, x + i * n * m);
          });
          return p;
        },
        [&](const Share& s, const Prepared& p) {
          float* w = rows_of(params[s.batch], s).data_ptr<float>();
          const MuonMatrixShape shape{params[s.batch].size(1), params[s.batch].size(2)};
          const int64_t size = shape.rows * shape.cols;
          with_iterate_type(p.x.contiguous(), [&](const auto* x) {
            for (int64_t i = 0; i < s.count; ++i)
              muon_finish(x + i * size, w + i * size, static_cast<float>(decay),
                          static_cast<float>(step[s.batch]), shape);
          });
        });
    return;
  }
  newton_schulz_shares(
      grads, dtype, kNewtonSchulzSteps,
      [&](const Share& s) {
        const torch::Tensor g = rows_of(grads[s.batch], s);
        const torch::Tensor momentum = rows_of(momenta[s.batch], s);
        momentum.mul_(mu).add_(g);
        return prepare(g.add(momentum, mu), dtype);
      },
      [&](const Share& s, const Prepared& p) {
        rows_of(params[s.batch], s).mul_(decay).add_(finish(p), step[s.batch]);
      });
}

}  // namespace tinylm
