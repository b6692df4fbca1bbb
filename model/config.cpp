#include "model/config.h"

#include <stdexcept>

namespace tinylm {
namespace {

void require(bool ok, const std::string& message) {
  if (!ok) throw std::invalid_argument(message);
}

}  // namespace

void ModelConfig::validate() const {
  require(n_layer >= 1, "model.n_layer must be >= 1 (got " + std::to_string(n_layer) + ")");
  require(n_head >= 1, "model.n_head must be >= 1 (got " + std::to_string(n_head) + ")");
  require(n_embd >= 1, "model.n_embd must be >= 1 (got " + std::to_string(n_embd) + ")");
  require(n_embd % n_head == 0, "model.n_embd (" + std::to_string(n_embd) +
                                    ") must be divisible by model.n_head (" +
                                    std::to_string(n_head) + ")");
  require(block_size >= 1,
          "model.block_size must be >= 1 (got " + std::to_string(block_size) + ")");
  require(vocab_size >= 1,
          "model.vocab_size must be >= 1 (got " + std::to_string(vocab_size) + ")");
  require(dropout >= 0.0 && dropout < 1.0,
          "model.dropout must be in [0, 1) (got " + std::to_string(dropout) + ")");
  require(init_std > 0.0 && init_std <= 1.0,
          "model.init_std must be in (0, 1] (got " + std::to_string(init_std) + ")");
  require(pos_encoding == "learned" || pos_encoding == "sinusoidal" || pos_encoding == "rope" ||
              pos_encoding == "none",
          "model.pos_encoding must be one of learned, sinusoidal, rope, none (got \"" +
              pos_encoding + "\")");
  require(pos_encoding != "rope" || (n_embd / n_head) % 2 == 0,
          "model.n_embd / model.n_head (the head size) must be even for rope (got " +
              std::to_string(n_embd / n_head) + ")");
  require(norm == "layernorm" || norm == "rmsnorm",
          "model.norm must be one of layernorm, rmsnorm (got \"" + norm + "\")");
  require(mlp == "gelu" || mlp == "swiglu",
          "model.mlp must be one of gelu, swiglu (got \"" + mlp + "\")");
  require(n_kv_head >= 0 && (n_kv_head == 0 || n_head % n_kv_head == 0),
          "model.n_kv_head must divide model.n_head (" + std::to_string(n_head) +
              "), or be 0 for n_head (got " + std::to_string(n_kv_head) + ")");
  require(pos_encoding != "sinusoidal" || n_embd % 2 == 0,
          "model.n_embd must be even for sinusoidal positions (got " + std::to_string(n_embd) +
              ")");
}

}  // namespace tinylm
