#include "train/muon.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <string>

#include "train/precision.h"

namespace tinylm {

bool bfloat16_products_sum_in_float32() {
  static const bool avx512 = [] {
    const std::set<std::string> flags = cpu_flags();
    return flags.count("avx512bw") && flags.count("avx512vl") && flags.count("avx512dq");
  }();
  return avx512 && at::globalContext().userEnabledMkldnn();
}

torch::Tensor newton_schulz(const torch::Tensor& g, torch::ScalarType dtype, int steps) {
  TORCH_CHECK(g.dim() == 2, "newton_schulz: expected a matrix, got ", g.sizes());
  constexpr double a = 3.4445, b = -4.7750, c = 2.0315;
  torch::NoGradGuard no_grad;
  if (dtype == torch::kBFloat16 && g.is_cpu() && !bfloat16_products_sum_in_float32())
    dtype = torch::kFloat32;
  torch::Tensor x = g.to(dtype);
  x = x / (x.norm() + 1e-7);  // singular values <= 1: inside the iteration's basin
  const bool tall = g.size(0) > g.size(1);
  if (tall) x = x.t();  // X X^T is then the smaller Gram matrix
  for (int i = 0; i < steps; ++i) {
    const torch::Tensor A = torch::mm(x, x.t());
    const torch::Tensor B = torch::addmm(A, A, A, b, c);  // b A + c A A
    x = torch::addmm(x, B, x, a, 1.0);                    // a X + B X
  }
  if (tall) x = x.t();
  return x.to(torch::kFloat32).contiguous();
}

void muon_update(torch::Tensor param, const torch::Tensor& grad, torch::Tensor momentum, double lr,
                 double mu, torch::ScalarType dtype) {
  torch::NoGradGuard no_grad;
  momentum.mul_(mu).add_(grad);
  const torch::Tensor update = newton_schulz(grad.add(momentum, mu), dtype);
  const double shape_scale = std::sqrt(
      std::max(1.0, static_cast<double>(param.size(0)) / static_cast<double>(param.size(1))));
  param.add_(update, -lr * shape_scale);
}

}  // namespace tinylm
