#include "model/linear.h"

#include <cmath>

#include "model/blas.h"

namespace tinylm {

LinearImpl::LinearImpl(int64_t in_features, int64_t out_features, bool with_bias) {
  // torch::nn::Linear's init, U(-1/sqrt(in), 1/sqrt(in)); GPT::init_weights replaces it.
  const double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
  weight = register_parameter("weight", torch::empty({out_features, in_features}).uniform_(-bound, bound));
  if (with_bias) bias = register_parameter("bias", torch::empty({out_features}).uniform_(-bound, bound));
}

torch::Tensor LinearImpl::forward(const torch::Tensor& x) {
  const int64_t in = x.size(-1), rows = x.numel() / std::max<int64_t>(in, 1);
  const bool vector_path = rows >= 1 && rows <= kMaxMatrixVectorRows && !torch::GradMode::is_enabled() &&
                           x.device().is_cpu() && x.scalar_type() == torch::kFloat32 &&
                           weight.scalar_type() == torch::kFloat32;
  if (!vector_path) return torch::nn::functional::linear(x, weight, bias);
  const torch::Tensor flat = x.reshape({rows, in});
  std::vector<torch::Tensor> out;
  out.reserve(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    out.push_back(bias.defined() ? torch::addmv(bias, weight, flat[r]) : torch::mv(weight, flat[r]));
  }
  std::vector<int64_t> shape = x.sizes().vec();
  shape.back() = weight.size(0);
  return torch::stack(out).view(shape);
}

}  // namespace tinylm
