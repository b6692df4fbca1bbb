#pragma once
// The shape and options of a GPT: plain data with defaults, its keys (model/config_key.h)
// and validate(). Reading it from TOML or JSON is train/'s business, through the keys.

#include <cstdint>
#include <string>
#include <vector>

#include "model/config_key.h"
#include "model/positions.h"

namespace tinylm {

enum class NormKind { kLayerNorm, kRmsNorm };
// gelu_tanh: GELU by its tanh approximation, as GPT-2 was trained (Hugging Face's "gelu_new").
enum class MlpKind { kGelu, kGeluTanh, kSwiglu };  // Linear 4C, GELU, Linear | LLaMA's gated MLP

constexpr std::array<const char*, 2> enum_names(NormKind) { return {"layernorm", "rmsnorm"}; }
constexpr std::array<const char*, 3> enum_names(MlpKind) { return {"gelu", "gelu_tanh", "swiglu"}; }

struct ModelConfig {
  int64_t n_layer = 4;
  int64_t n_head = 4;
  int64_t n_embd = 128;
  int64_t block_size = 64;
  int64_t vocab_size = 0;  // set from the tokenizer; not a key of the TOML files
  double dropout = 0.0;
  bool bias = true;
  PosEncoding pos_encoding = PosEncoding::kLearned;
  NormKind norm = NormKind::kLayerNorm;
  MlpKind mlp = MlpKind::kGelu;
  int64_t n_kv_head = 0;  // 0 = n_head
  bool tie_weights = true;
  bool attn_only = false;
  double init_std = 0.02;
  int64_t num_buckets = 32;    // relative positions: buckets of distance (half exact)
  int64_t max_distance = 128;  // relative positions: where the log-spaced buckets end

  int64_t head_size() const { return n_embd / n_head; }
  int64_t kv_heads() const { return n_kv_head > 0 ? n_kv_head : n_head; }
  // SwiGLU's hidden width: 8C/3 rounded up to a multiple of 8, so that its three matrices
  // hold about the parameters of GELU's two C x 4C ones.
  int64_t swiglu_hidden() const { return (8 * n_embd / 3 + 7) / 8 * 8; }
  // What the position encoding does (model/positions.h).
  PositionTraits positions() const { return position_traits(pos_encoding); }

  // Throws std::invalid_argument naming the field ("model.n_head ...") and the allowed range.
  void validate() const;
};

// Every key of ModelConfig (vocab_size aside), in the order configs list them.
const std::vector<ConfigKey<ModelConfig>>& model_keys();

// The keys config.json must hold: nanoGPT's GPTConfig. The others, absent in runs from
// before they existed, take their defaults.
const std::vector<std::string>& gptconfig_keys();

}  // namespace tinylm
