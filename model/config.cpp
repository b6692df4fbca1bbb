#include "model/config.h"

#include <stdexcept>

namespace tinylm {
namespace {

void require(bool ok, const std::string& message) {
  if (!ok) throw std::invalid_argument(message);
}

}  // namespace

const std::vector<ConfigKey<ModelConfig>>& model_keys() {
  using M = ModelConfig;
  static const std::vector<ConfigKey<M>> keys = {
      key("n_layer", &M::n_layer, at_least(1), "transformer blocks"),
      key("n_head", &M::n_head, at_least(1), "attention heads per block"),
      key("n_embd", &M::n_embd, at_least(1), "width of the residual stream; divisible by n_head"),
      key("block_size", &M::block_size, at_least(1), "context length in tokens"),
      key("dropout", &M::dropout, between(0, 1, "[)"),
          "on the embeddings, the attention pattern and the residual branches"),
      key("bias", &M::bias, anything(), "biases in Linear and LayerNorm"),
      key("pos_encoding", &M::pos_encoding, anything(),
          "learned table, sinusoidal table (fixed), rotary (on q and k), none, relative (T5's "
          "learned bias per distance bucket) or alibi (fixed linear penalties)"),
      key("norm", &M::norm, anything(), "LayerNorm, or RMSNorm (x / rms(x) * weight, no bias)"),
      key("mlp", &M::mlp, anything(),
          "GELU (C to 4C to C), the same with GELU's tanh approximation (GPT-2's), or SwiGLU "
          "(SiLU(gate) * up, hidden 8C/3 to a multiple of 8)"),
      key("n_kv_head", &M::n_kv_head, at_least(0),
          "key/value heads (grouped-query attention); must divide n_head; 0 = n_head"),
      key("tie_weights", &M::tie_weights, anything(), "lm_head shares the token embedding"),
      key("attn_only", &M::attn_only, anything(), "blocks of attention alone (no ln_2, no MLP)"),
      key("init_std", &M::init_std, between(0, 1, "(]"),
          "std of the weights at init (GPT-2's); residual projections get it / sqrt(2 n_layer)"),
      key("num_buckets", &M::num_buckets, at_least(2),
          "relative positions: distance buckets per head, the first half exact"),
      key("max_distance", &M::max_distance, at_least(2),
          "relative positions: where the log-spaced buckets end; farther distances share the last"),
  };
  return keys;
}

const std::vector<std::string>& gptconfig_keys() {
  static const std::vector<std::string> keys = {"n_layer",    "n_head",  "n_embd", "block_size",
                                                "vocab_size", "dropout", "bias"};
  return keys;
}

void ModelConfig::validate() const {
  for (const ConfigKey<ModelConfig>& k : model_keys()) {
    try {
      k.check(*this);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument("model." + std::string(e.what()));
    }
  }
  require(vocab_size >= 1,
          "model.vocab_size must be >= 1 (got " + std::to_string(vocab_size) + ")");
  require(n_embd % n_head == 0, "model.n_embd (" + std::to_string(n_embd) +
                                    ") must be divisible by model.n_head (" +
                                    std::to_string(n_head) + ")");
  require(!positions().rotates || head_size() % 2 == 0,
          "model.n_embd / model.n_head (the head size) must be even for rope (got " +
              std::to_string(head_size()) + ")");
  require(n_kv_head == 0 || n_head % n_kv_head == 0,
          "model.n_kv_head must divide model.n_head (" + std::to_string(n_head) +
              "), or be 0 for n_head (got " + std::to_string(n_kv_head) + ")");
  require(max_distance > num_buckets / 2, "model.max_distance (" + std::to_string(max_distance) +
                                              ") must exceed model.num_buckets / 2 (" +
                                              std::to_string(num_buckets / 2) +
                                              "), where the exact buckets end");
  require(
      pos_encoding != PosEncoding::kSinusoidal || n_embd % 2 == 0,
      "model.n_embd must be even for sinusoidal positions (got " + std::to_string(n_embd) + ")");
}

}  // namespace tinylm
