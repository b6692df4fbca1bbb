#pragma once
// y = x W^T + b, with W (out, in) and b (out) named weight and bias as in torch::nn::Linear,
// so state dicts read the same. One difference in speed, not in numbers' meaning: one float32
// row on the CPU without autograd (a cached generation step of one sample, on the hooked
// path) runs as LibTorch's matrix-vector product instead of a GEMM, which would pack the
// whole weight for one row (measured: 28% of a cached sampling step went to sgemm's packing
// against 7% in its kernel; docs/MEASUREMENTS.md).

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
