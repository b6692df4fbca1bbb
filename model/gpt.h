#pragma once
// The GPT: token embedding + positions (learned or sinusoidal added to the stream, the tokens
// scaled by sqrt(C) for sinusoidal; rope, relative or alibi inside attention; or none: what
// each does is model/positions.h's) -> n_layer pre-norm blocks -> ln_f -> lm_head (tied
// to the token embedding by default). Parameter names are nanoGPT's (transformer.wte.weight,
// transformer.h.0.attn.c_attn.weight, ...), so a state dict reads the same in both worlds. Knows
// nothing about files or tokenizers. Hook points: hook_embed (B, T, C, after the scale),
// hook_pos_embed (T, C) for learned and sinusoidal, the blocks' (model/block.h, model/attention.h),
// and ln_f.hook_normalized (B, T, C).

#include <map>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "model/block.h"
#include "model/config.h"
#include "model/hook_point.h"
#include "model/kv_cache.h"
#include "model/linear.h"
#include "model/norm.h"

namespace tinylm {

// The original Transformer's table: PE[p, 2i] = sin(p / 10000^(2i/C)), PE[p, 2i+1] = cos(...).
torch::Tensor sinusoidal_positions(int64_t block_size, int64_t n_embd);  // (block_size, C)

// nanoGPT's `transformer` container, so that names carry its prefix.
class TransformerImpl : public torch::nn::Module {
 public:
  // Block i's hook points are named blocks.{i}. inside `scope`.
  TransformerImpl(const ModelConfig& config, const HookScope& scope);

  torch::nn::Embedding wte{nullptr};  // (V, C)
  torch::nn::Embedding wpe{nullptr};  // (block_size, C), learned positions only
  std::vector<Block> h;
  Norm ln_f{nullptr};
};
TORCH_MODULE(Transformer);

class GPTImpl : public torch::nn::Module {
  // First, in this order: the members after them are built from them.
  ModelConfig config_;  // validated
  HookList hook_points_;
  HookScope scope_{&hook_points_, ""};

 public:
  explicit GPTImpl(ModelConfig config);

  // GPT-2 init: weights N(0, s), residual projections N(0, s / sqrt(2 L)), biases 0 (s is
  // model.init_std, GPT-2's 0.02 by default), LayerNorm weight 1, all drawn from `generator`.
  void init_weights(torch::Generator& generator);

  // (B, T) int64 -> logits (B, T, V). T may exceed block_size for every encoding but learned.
  torch::Tensor forward(const torch::Tensor& idx);
  // The same with a KV cache (model/kv_cache.h): idx holds the tokens after the cached ones;
  // logits (B, T, V) for them. With relative positions a full cache drops its oldest
  // positions to make room; with absolute ones a forward past block_size is an error.
  torch::Tensor forward(const torch::Tensor& idx, KVCache& cache);
  KVCache make_cache() const { return KVCache(config_.n_layer, config_.block_size); }

  // forward(idx) in three parts, for analyses that start or stop inside it:
  //   unembed(forward_from(0, embed(idx))).
  // embed: (B, T) -> blocks.0.hook_resid_pre's input (B, T, C), positions from 0.
  torch::Tensor embed(const torch::Tensor& idx);
  // From block `layer` on: x is blocks.{layer}.hook_resid_pre (B, T, C) of a window that
  // starts at position 0 (a cached prefix); returns ln_f.hook_normalized (B, T, C). The hooks
  // of blocks layer.. apply, as in a whole forward pass.
  torch::Tensor forward_from(int64_t layer, const torch::Tensor& x);
  // normalized (..., C) -> logits (..., V).
  torch::Tensor unembed(const torch::Tensor& normalized) const;

  // The position table's first T rows (T, C); undefined where nothing is added to the stream
  // (rope, none, relative, alibi). Sinusoidal rows past block_size are computed.
  torch::Tensor positions(int64_t T) const;
  // The unembedding (V, C): lm_head's weight, or the token embedding when tied.
  const torch::Tensor& unembedding() const;

  // Hook point names in the order the forward pass reaches them.
  std::vector<std::string> hook_names() const;
  bool has_hooks() const;
  // Throws std::invalid_argument naming the closest valid name when there is none such.
  HookPoint& hook_point(const std::string& name);
  [[nodiscard]] HookHandle add_hook(const std::string& name, HookFn hook) {
    return hook_point(name).add(std::move(hook));
  }

  const ModelConfig& config() const { return config_; }
  int64_t num_parameters() const;
  // Where the parameters live (after module->to(device)).
  torch::Device device() const { return transformer->wte->weight.device(); }

 private:
  HookPoint hook_embed_{scope_, "hook_embed"};                                          // (B, T, C)
  HookPoint hook_pos_embed_{scope_, "hook_pos_embed", config_.positions().adds_table};  // (T, C)

 public:
  Transformer transformer;  // the blocks' hook points come here in the list
  Linear lm_head{nullptr};  // only when !tie_weights

 private:
  torch::Tensor forward_impl(const torch::Tensor& idx, KVCache* cache);
  torch::Tensor embed_at(const torch::Tensor& idx, int64_t first);
  torch::Tensor blocks_from(int64_t layer, torch::Tensor x, KVCache* cache);

  HookPoint hook_normalized_{scope_, "ln_f.hook_normalized"};  // (B, T, C)
  torch::Tensor sinusoid_;  // (block_size, C) buffer, sinusoidal positions only
  std::map<std::string, HookPoint*> by_name_;
};
TORCH_MODULE(GPT);

}  // namespace tinylm
