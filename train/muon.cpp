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

// The same on one contiguous float32 CPU matrix x (rows, cols), rows <= cols, in place, by
// single-threaded BLAS: A = X X^T and A A are symmetric, so each is one syrk (half a gemm's
// multiply-adds, 1.6x a gemm's speed at these shapes in OpenBLAS) mirrored to full; a X + B X
// is one gemm, (a I + B) X, with no copy of X.
void iterate_symmetric(torch::Tensor x, int steps) {
  constexpr auto a = static_cast<float>(kA), b = static_cast<float>(kB), c = static_cast<float>(kC);
  const int n = static_cast<int>(x.size(0)), m = static_cast<int>(x.size(1));
  torch::Tensor gram = torch::empty({n, n}), poly = torch::empty({n, n}),
                spare = torch::empty_like(x);
  float *A = gram.data_ptr<float>(), *B = poly.data_ptr<float>();
  float *X = x.data_ptr<float>(), *next = spare.data_ptr<float>();
  const auto mirror_lower = [n](float* s) {
    for (int i = 0; i < n; ++i)
      for (int j = i + 1; j < n; ++j) s[i * n + j] = s[j * n + i];
  };
  for (int i = 0; i < steps; ++i) {
    syrk_lower_row_major(n, m, 1.0f, X, m, 0.0f, A, n);
    mirror_lower(A);
    std::copy(A, A + n * n, B);
    syrk_lower_row_major(n, n, c, A, n, b, B, n);  // b A + c A A^T, and A^T = A
    mirror_lower(B);
    for (int d = 0; d < n; ++d) B[d * n + d] += a;
    gemm_row_major<float>(false, false, n, m, n, 1.0f, B, n, X, m, 0.0f, next, m);  // (a I + B) X
    std::swap(X, next);
  }
  if (X != x.data_ptr<float>()) x.copy_(spare);
}

}  // namespace

torch::Tensor newton_schulz(const torch::Tensor& g, torch::ScalarType dtype, int steps) {
  TORCH_CHECK(g.dim() == 2 || g.dim() == 3,
              "newton_schulz: expected a matrix or a batch of matrices, got ", g.sizes());
  torch::NoGradGuard no_grad;
  if (dtype == torch::kBFloat16 && g.is_cpu() && !bfloat16_products_sum_in_float32())
    dtype = torch::kFloat32;
  torch::Tensor x = g.dim() == 2 ? g.unsqueeze(0) : g;
  const bool tall = g.size(-2) > g.size(-1);
  // X X^T is then the smaller Gram matrix; a contiguous X makes its first product 2x faster.
  if (tall) x = x.transpose(-2, -1);
  x = x.to(dtype).contiguous();
  // Each matrix's singular values <= 1: inside the iteration's basin.
  x = x / (x.norm(2, {-2, -1}, /*keepdim=*/true) + 1e-7);
  if (x.is_cpu() && x.size(0) > 1 && x.size(0) >= at::get_num_threads()) {
    // On the CPU, a thread per matrix: splitting each of these small products over the
    // threads cost more than it gained (the optimizer's time per step fell 1.6x in float32,
    // OpenBLAS, and 1.2x in bfloat16, oneDNN, on 2 threads). With fewer matrices than
    // threads that would leave threads idle, so each product is split over them instead.
    torch::Tensor out = torch::empty_like(x);
    at::parallel_for(0, x.size(0), 1, [&](int64_t begin, int64_t end) {
      if (x.scalar_type() != torch::kFloat32) {
        out.narrow(0, begin, end - begin).copy_(iterate(x.narrow(0, begin, end - begin), steps));
        return;
      }
      for (int64_t i = begin; i < end; ++i) {
        out[i].copy_(x[i]);
        iterate_symmetric(out[i], steps);
      }
    });
    x = out;
  } else {
    x = iterate(x, steps);
  }
  if (tall) x = x.transpose(-2, -1);
  x = x.to(torch::kFloat32).contiguous();
  return g.dim() == 2 ? x.squeeze(0) : x;
}

void muon_update(torch::Tensor param, const torch::Tensor& grad, torch::Tensor momentum, double lr,
                 double mu, torch::ScalarType dtype) {
  torch::NoGradGuard no_grad;
  momentum.mul_(mu).add_(grad);
  const torch::Tensor update = newton_schulz(grad.add(momentum, mu), dtype);
  const double shape_scale = std::sqrt(
      std::max(1.0, static_cast<double>(param.size(-2)) / static_cast<double>(param.size(-1))));
  param.add_(update, -lr * shape_scale);
}

}  // namespace tinylm
