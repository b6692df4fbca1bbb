#pragma once
// LayerNorm with an optional bias (torch::nn::LayerNorm has weight and bias or neither;
// GPT-2 without biases needs a weight alone). eps = 1e-5 as in PyTorch and nanoGPT.

#include <torch/torch.h>

namespace tinylm {

class LayerNormImpl : public torch::nn::Module {
 public:
  LayerNormImpl(int64_t n_embd, bool bias) {
    weight = register_parameter("weight", torch::ones({n_embd}));
    if (bias) this->bias = register_parameter("bias", torch::zeros({n_embd}));
  }
  torch::Tensor forward(const torch::Tensor& x) {  // (..., C) -> (..., C)
    return torch::layer_norm(x, {weight.size(0)}, weight, bias, 1e-5);
  }
  torch::Tensor weight;
  torch::Tensor bias;  // undefined when bias = false
};
TORCH_MODULE(LayerNorm);

}  // namespace tinylm
