#pragma once
// y = x W^T + b, with W (out, in) and b (out) named weight and bias as in torch::nn::Linear,
// so state dicts read the same. One difference in speed, not in numbers' meaning: for one
// row without autograd (a cached generation step of one sample, on the hooked path) it runs
// a matrix-vector product (model/blas.h says why: measured, 28% of a cached sampling
// step went to sgemm packing the weights against 7% in its kernel).

#include <cstdint>

#include <torch/torch.h>

namespace tinylm {

class LinearImpl : public torch::nn::Module {
 public:
  LinearImpl(int64_t in_features, int64_t out_features, bool bias);
  torch::Tensor forward(const torch::Tensor& x);  // (..., in) -> (..., out)

  torch::Tensor weight;  // (out, in)
  torch::Tensor bias;    // (out), undefined without a bias
};
TORCH_MODULE(Linear);

}  // namespace tinylm
