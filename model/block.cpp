#include "model/block.h"

namespace tinylm {

MLPImpl::MLPImpl(const ModelConfig& config) : dropout_(config.dropout) {
  const int64_t C = config.n_embd;
  c_fc = register_module("c_fc",
                         torch::nn::Linear(torch::nn::LinearOptions(C, 4 * C).bias(config.bias)));
  c_proj = register_module(
      "c_proj", torch::nn::Linear(torch::nn::LinearOptions(4 * C, C).bias(config.bias)));
}

torch::Tensor MLPImpl::forward(const torch::Tensor& x) {
  torch::Tensor y = c_proj(torch::gelu(c_fc(x)));  // (B, T, C)
  if (is_training() && dropout_ > 0.0) y = torch::dropout(y, dropout_, true);
  return y;
}

BlockImpl::BlockImpl(const ModelConfig& config) {
  ln_1 = register_module("ln_1", LayerNorm(config.n_embd, config.bias));
  attn = register_module("attn", CausalSelfAttention(config));
  ln_2 = register_module("ln_2", LayerNorm(config.n_embd, config.bias));
  mlp = register_module("mlp", MLP(config));
}

torch::Tensor BlockImpl::forward(torch::Tensor x) {
  x = x + attn(ln_1(x));
  x = x + mlp(ln_2(x));
  return x;
}

}  // namespace tinylm
