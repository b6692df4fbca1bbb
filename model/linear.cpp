#include "model/linear.h"

#include <cmath>

#include "model/fused_linear.h"

namespace tinylm {

LinearImpl::LinearImpl(int64_t in_features, int64_t out_features, bool with_bias) {
  // torch::nn::Linear's init, U(-1/sqrt(in), 1/sqrt(in)); GPT::init_weights replaces it.
  const double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
  weight = register_parameter("weight",
                              torch::empty({out_features, in_features}).uniform_(-bound, bound));
  if (with_bias)
    bias = register_parameter("bias", torch::empty({out_features}).uniform_(-bound, bound));
}

torch::Tensor LinearImpl::forward(const torch::Tensor& x) {
  if (bfloat16_linear_takes(x, weight)) return bfloat16_linear(x, weight, bias);
  const bool one_row = x.numel() == x.size(-1) && x.numel() > 0 && !torch::GradMode::is_enabled() &&
                       x.device().is_cpu() && x.scalar_type() == torch::kFloat32 &&
                       weight.scalar_type() == torch::kFloat32;
  std::vector<int64_t> shape = x.sizes().vec();
  shape.back() = weight.size(0);
  if (one_row) {
    const torch::Tensor row = x.reshape({-1});
    return (bias.defined() ? torch::addmv(bias, weight, row) : torch::mv(weight, row)).view(shape);
  }
  if (float32_linear_takes(x, weight)) return float32_linear(x, weight, bias);
  // LibTorch 1.13 takes a linear of a 3-D input as a product and then a pass adding the
  // bias (in bfloat16, 8% of the samples of a replica's forward and backward under perf).
  if (x.dim() > 2 && bias.defined() && x.is_contiguous())
    return torch::addmm(bias, x.view({-1, x.size(-1)}), weight.t()).view(shape);
  return torch::nn::functional::linear(x, weight, bias);
}

}  // namespace tinylm
