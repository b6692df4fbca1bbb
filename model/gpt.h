#pragma once
// The GPT: token embedding + positions (learned, sinusoidal or none) -> n_layer pre-norm
// blocks -> ln_f -> lm_head (tied to the token embedding by default). Parameter names are
// nanoGPT's (transformer.wte.weight, transformer.h.0.attn.c_attn.weight, ...), so a state
// dict reads the same in both worlds. Knows nothing about files or tokenizers.

#include <vector>

#include <torch/torch.h>

#include "model/block.h"
#include "model/config.h"
#include "model/layer_norm.h"

namespace tinylm {

// The original Transformer's table: PE[p, 2i] = sin(p / 10000^(2i/C)), PE[p, 2i+1] = cos(...).
torch::Tensor sinusoidal_positions(int64_t block_size, int64_t n_embd);  // (block_size, C)

// nanoGPT's `transformer` container, so that names carry its prefix.
class TransformerImpl : public torch::nn::Module {
 public:
  explicit TransformerImpl(const ModelConfig& config);

  torch::nn::Embedding wte{nullptr};  // (V, C)
  torch::nn::Embedding wpe{nullptr};  // (block_size, C), learned positions only
  std::vector<Block> h;
  LayerNorm ln_f{nullptr};
};
TORCH_MODULE(Transformer);

class GPTImpl : public torch::nn::Module {
 public:
  explicit GPTImpl(ModelConfig config);

  // GPT-2 init: weights N(0, 0.02), residual projections N(0, 0.02 / sqrt(2 L)), biases 0,
  // LayerNorm weight 1, all drawn from `generator`.
  void init_weights(torch::Generator& generator);

  torch::Tensor forward(const torch::Tensor& idx);  // (B, T) int64 -> logits (B, T, V)

  const ModelConfig& config() const { return config_; }
  int64_t num_parameters() const;

  Transformer transformer{nullptr};
  torch::nn::Linear lm_head{nullptr};  // only when !tie_weights

 private:
  ModelConfig config_;
  torch::Tensor sinusoid_;  // (block_size, C) buffer, sinusoidal positions only
};
TORCH_MODULE(GPT);

}  // namespace tinylm
