#pragma once
// The shape and options of a GPT. Plain data with defaults and validate(); reading it from
// TOML or JSON is the caller's business (train/run_config, train/checkpoint).

#include <cstdint>
#include <string>

namespace tinylm {

struct ModelConfig {
  int64_t n_layer = 4;
  int64_t n_head = 4;
  int64_t n_embd = 128;
  int64_t block_size = 64;
  int64_t vocab_size = 0;  // set from the tokenizer
  double dropout = 0.0;
  bool bias = true;                        // biases in Linear and LayerNorm
  std::string pos_encoding = "learned";    // learned | sinusoidal | rope | none
  bool tie_weights = true;                 // lm_head shares the token embedding
  bool attn_only = false;                  // blocks without ln_2 and MLP
  double init_std = 0.02;                  // std of the weights at init (GPT-2's 0.02)

  int64_t head_size() const { return n_embd / n_head; }

  // Throws std::invalid_argument naming the field ("model.n_head ...") and the allowed range.
  void validate() const;
};

}  // namespace tinylm
