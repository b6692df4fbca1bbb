#pragma once
// One pre-norm transformer block: x + attn(ln_1(x)), then + mlp(ln_2(x)); the MLP is
// Linear(C, 4C), exact GELU, Linear(4C, C). Submodule names follow nanoGPT.

#include <torch/torch.h>

#include "model/attention.h"
#include "model/config.h"
#include "model/layer_norm.h"

namespace tinylm {

class MLPImpl : public torch::nn::Module {
 public:
  explicit MLPImpl(const ModelConfig& config);
  torch::Tensor forward(const torch::Tensor& x);  // (B, T, C) -> (B, T, C)

  torch::nn::Linear c_fc{nullptr};    // (4C, C)
  torch::nn::Linear c_proj{nullptr};  // (C, 4C)

 private:
  double dropout_;
};
TORCH_MODULE(MLP);

class BlockImpl : public torch::nn::Module {
 public:
  explicit BlockImpl(const ModelConfig& config);
  torch::Tensor forward(torch::Tensor x);  // (B, T, C) -> (B, T, C)

  LayerNorm ln_1{nullptr};
  CausalSelfAttention attn{nullptr};
  LayerNorm ln_2{nullptr};
  MLP mlp{nullptr};
};
TORCH_MODULE(Block);

}  // namespace tinylm
