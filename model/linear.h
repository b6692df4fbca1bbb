#pragma once
// y = x W^T + b, with W (out, in) and b (out) named weight and bias as in torch::nn::Linear,
// so state dicts read the same. Two differences in speed, not in numbers' meaning: one float32
// row on the CPU without autograd (a cached generation step of one sample, on the hooked
// path) runs as LibTorch's matrix-vector product instead of a GEMM, which would pack the
// whole weight for one row (measured: 28% of a cached sampling step went to sgemm's packing
// against 7% in its kernel; docs/MEASUREMENTS.md); and a contiguous input of more than two
// dimensions with a bias is one addmm over its rows, the bias added in the product's pass,
// not in a pass of its own after it (as LibTorch 2 does; bfloat16 steps 0.94 of the time).

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
