#include "train/muon.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>

#include "model/ops/blas.h"
#include "train/precision.h"

namespace tinylm {

bool bfloat16_products_sum_in_float32() {
  static const bool avx512 = [] {
    const std::set<std::string> flags = cpu_flags();
    return flags.count("avx512bw") && flags.count("avx512vl") && flags.count("avx512dq");
  }();
  return avx512 && at::globalContext().userEnabledMkldnn();
}

namespace {

// The quintic's coefficients (muon.h).
constexpr double kA = 3.4445, kB = -4.7750, kC = 2.0315;

// `steps` steps of the quintic on a batch x (count, rows, cols), rows <= cols.
torch::Tensor iterate(torch::Tensor x, int steps) {
  for (int i = 0; i < steps; ++i) {
    const torch::Tensor A = torch::bmm(x, x.transpose(-2, -1));
    const torch::Tensor B = torch::baddbmm(A, A, A, kB, kC);  // b A + c A A
    x = torch::baddbmm(x, B, x, kA, 1.0);                     // a X + B X
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
  // out = a I + b S + c S S for a symmetric S: the quintic's polynomial.
  void quintic(const float* S, float* out) const {
    std::copy(S, S + n * n, out);
    syrk_lower_row_major(n, n, static_cast<float>(kC), S, n, static_cast<float>(kB), out, n);
    mirror_lower(out);
    for (int d = 0; d < n; ++d) out[d * n + d] += static_cast<float>(kA);
  }
  void square(const float* S, float* out) const {  // S S^T
    syrk_lower_row_major(n, n, 1.0f, S, n, 0.0f, out, n);
    mirror_lower(out);
  }
  void times(const float* L, const float* R, float* out) const {  // L R
    gemm_row_major<float>(false, false, n, n, n, 1.0f, L, n, R, n, 0.0f, out, n);
  }
};

// The quintic on one contiguous float32 CPU matrix x (n, m), n <= m, in place, each step as
// written: A = X X^T (syrk), P = a I + b A + c A A (syrk), X <- P X (gemm).
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
    square.quintic(A, P);
    gemm_row_major<float>(false, false, n, m, n, 1.0f, P, n, X, m, 0.0f, next, m);
    std::swap(X, next);
  }
  if (X != x.data_ptr<float>()) x.copy_(spare);
}

// The same result through n x n products only. Every P_k is a polynomial in G = X0 X0^T, so
// they commute: X_k = Q_k X0 with Q_k = P_{k-1} ... P_0, and A_{k+1} = X_{k+1} X_{k+1}^T =
// P_k A_k P_k = P_k^2 A_k. Only G and the last Q X0 touch the m-wide X. Q's norm grows
// up to a^steps (the quintic's largest gain, at small singular values), and rounding in Q
// with it: about 1e-4 relative against 5e-6 for the direct steps, where the singular values
// spread over four decades (float64 reference) -- bfloat16's iteration is 1.6e-2 off.
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
    square.quintic(A, P);
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

// Multiply-adds of `steps` steps on a matrix with sides n <= m (syrk counted as half a gemm):
// per direct step n^2 m / 2 + n^3 / 2 + n^2 m; through G, n^2 m / 2 and n^2 m once, and per
// step at most 3 n^3 (first and last less).
double direct_multiply_adds(double n, double m, int steps) {
  return steps * (1.5 * n * n * m + 0.5 * n * n * n);
}
double gram_multiply_adds(double n, double m, int steps) {
  return 1.5 * n * n * m + (3.0 * steps - 2.5) * n * n * n;
}

}  // namespace

bool newton_schulz_through_gram(int64_t rows, int64_t cols, int steps) {
  const double n = static_cast<double>(std::min(rows, cols));
  const double m = static_cast<double>(std::max(rows, cols));
  return steps > 1 && gram_multiply_adds(n, m, steps) < direct_multiply_adds(n, m, steps);
}

namespace {

// A batch (count, n, m) ready for the iteration: n <= m, in the dtype it iterates in, each
// matrix scaled to norm 1; and what turns the result back into the caller's shape.
struct Prepared {
  torch::Tensor x;
  bool tall;    // the caller's matrices are (m, n): x holds their transposes
  bool single;  // the caller passed one matrix, not a batch
};

Prepared prepare(const torch::Tensor& g, torch::ScalarType dtype) {
  TORCH_CHECK(g.dim() == 2 || g.dim() == 3,
              "newton_schulz: expected a matrix or a batch of matrices, got ", g.sizes());
  // LibTorch 1.13 hands a bfloat16 product to oneDNN only past 16 x 16 x 16 multiply-adds,
  // counting the batch; a smaller one takes its own GEMM, which sums in bfloat16 (a 16-wide
  // matrix alone came out 0.09 from float64 instead of 0.016). At that size float32 is free.
  const int64_t side = std::min(g.size(-2), g.size(-1));
  if (dtype == torch::kBFloat16 && g.is_cpu() &&
      (!bfloat16_products_sum_in_float32() || side * side * side <= 16 * 16 * 16))
    dtype = torch::kFloat32;
  Prepared p{g.dim() == 2 ? g.unsqueeze(0) : g, g.size(-2) > g.size(-1), g.dim() == 2};
  // X X^T is then the smaller Gram matrix; a contiguous X makes its first product 2x faster.
  if (p.tall) p.x = p.x.transpose(-2, -1);
  p.x = p.x.to(dtype).contiguous();
  // Each matrix's singular values <= 1: inside the iteration's basin.
  p.x = p.x / (p.x.norm(2, {-2, -1}, /*keepdim=*/true) + 1e-7);
  return p;
}

torch::Tensor finish(const Prepared& p) {
  torch::Tensor x = p.tall ? p.x.transpose(-2, -1) : p.x;
  x = x.to(torch::kFloat32).contiguous();
  return p.single ? x.squeeze(0) : x;
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
std::vector<std::vector<Share>> deal(const std::vector<torch::Tensor>& xs,
                                     const std::vector<double>& cost, int threads) {
  std::vector<size_t> order;  // one entry a matrix: its batch, longest first
  for (size_t b = 0; b < xs.size(); ++b) order.insert(order.end(), xs[b].size(0), b);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return cost[a] > cost[b]; });
  std::vector<std::vector<int64_t>> taken(threads, std::vector<int64_t>(xs.size(), 0));
  std::vector<double> load(threads, 0.0);
  for (const size_t b : order) {
    const auto least = std::min_element(load.begin(), load.end()) - load.begin();
    ++taken[least][b];
    load[least] += cost[b];
  }
  std::vector<std::vector<Share>> shares(threads);
  std::vector<int64_t> next(xs.size(), 0);
  for (int t = 0; t < threads; ++t)
    for (size_t b = 0; b < xs.size(); ++b)
      if (taken[t][b] > 0) {
        shares[t].push_back({b, next[b], taken[t][b]});
        next[b] += taken[t][b];
      }
  return shares;
}

// Runs each thread's shares, one thread each.
template <typename Run>
void on_each_thread(const std::vector<std::vector<Share>>& shares, const Run& run) {
  at::parallel_for(0, static_cast<int64_t>(shares.size()), 1, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t)
      for (const Share& share : shares[t]) run(share);
  });
}

// Float32 matrices of several batches, each iterated on one thread by BLAS (the cheaper of
// the two iterations above), in place.
void iterate_float32_on_threads(const std::vector<torch::Tensor>& xs, int steps) {
  std::vector<bool> through_gram;
  std::vector<double> cost;
  for (const torch::Tensor& x : xs) {
    const double n = static_cast<double>(x.size(1)), m = static_cast<double>(x.size(2));
    through_gram.push_back(newton_schulz_through_gram(x.size(1), x.size(2), steps));
    cost.push_back(through_gram.back() ? gram_multiply_adds(n, m, steps)
                                       : direct_multiply_adds(n, m, steps));
  }
  on_each_thread(deal(xs, cost, at::get_num_threads()), [&](const Share& share) {
    for (int64_t i = share.begin; i < share.begin + share.count; ++i)
      through_gram[share.batch] ? iterate_through_gram(xs[share.batch][i], steps)
                                : iterate_directly(xs[share.batch][i], steps);
  });
}

// Batches in another dtype (bfloat16), dealt the same way, each thread's share of a batch
// as one batched product (oneDNN's bfloat16 calls cost more in overhead than in arithmetic
// at these sizes, so a thread's matrices of a shape stay together), in place.
void iterate_batches_on_threads(const std::vector<torch::Tensor>& xs, int steps) {
  std::vector<double> cost;  // iterate's multiply-adds: X X^T, A A and B X
  for (const torch::Tensor& x : xs) {
    const double n = static_cast<double>(x.size(1)), m = static_cast<double>(x.size(2));
    cost.push_back(steps * (2 * n * n * m + n * n * n));
  }
  on_each_thread(deal(xs, cost, at::get_num_threads()), [&](const Share& share) {
    torch::Tensor x = xs[share.batch].narrow(0, share.begin, share.count);
    x.copy_(iterate(x, steps));
  });
}

}  // namespace

std::vector<torch::Tensor> newton_schulz(const std::vector<torch::Tensor>& batches,
                                         torch::ScalarType dtype, int steps) {
  torch::NoGradGuard no_grad;
  std::vector<Prepared> prepared;
  bool cpu = true;
  for (const torch::Tensor& g : batches) {
    prepared.push_back(prepare(g, dtype));
    cpu = cpu && g.is_cpu();
  }
  // On the CPU, a thread per matrix: splitting each of these small products over the
  // threads cost more than it gained (the optimizer's time per step fell 1.6x in float32,
  // OpenBLAS, and 1.2x in bfloat16, oneDNN, on 2 threads). With fewer matrices than threads
  // that would leave threads idle, so each product is split over them instead.
  const int threads = at::get_num_threads();
  const auto on_threads = [&](int64_t count) { return cpu && count > 1 && count >= threads; };
  // Float32 and bfloat16 dealt apart: a multiply-add costs each its own time.
  for (const bool float32 : {true, false}) {
    std::vector<Prepared*> group;
    std::vector<torch::Tensor> xs;
    int64_t matrices = 0;
    for (Prepared& p : prepared)
      if ((p.x.scalar_type() == torch::kFloat32) == float32) {
        group.push_back(&p);
        xs.push_back(p.x);
        matrices += p.x.size(0);
      }
    if (!on_threads(matrices))
      for (Prepared* p : group) p->x = iterate(p->x, steps);
    else if (float32)
      iterate_float32_on_threads(xs, steps);
    else
      iterate_batches_on_threads(xs, steps);
  }
  std::vector<torch::Tensor> out;
  for (const Prepared& p : prepared) out.push_back(finish(p));
  return out;
}

torch::Tensor newton_schulz(const torch::Tensor& g, torch::ScalarType dtype, int steps) {
  return newton_schulz(std::vector<torch::Tensor>{g}, dtype, steps)[0];
}

void muon_update(const std::vector<MuonMatrices>& batches, double lr, double mu,
                 torch::ScalarType dtype) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> nesterov;
  for (const MuonMatrices& b : batches) {
    b.momentum.mul_(mu).add_(b.grad);
    nesterov.push_back(b.grad.add(b.momentum, mu));
  }
  const std::vector<torch::Tensor> updates = newton_schulz(nesterov, dtype);
  for (size_t i = 0; i < batches.size(); ++i) {
    const torch::Tensor& param = batches[i].param;
    const double shape_scale = std::sqrt(
        std::max(1.0, static_cast<double>(param.size(-2)) / static_cast<double>(param.size(-1))));
    param.add_(updates[i], -lr * shape_scale);
  }
}

}  // namespace tinylm
