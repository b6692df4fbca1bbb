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
  std::string norm = "layernorm";          // layernorm | rmsnorm
  std::string mlp = "gelu";                // gelu (Linear 4C, GELU, Linear) | swiglu
  int64_t n_kv_head = 0;                   // heads of keys and values; 0 = n_head, fewer = GQA
  bool tie_weights = true;                 // lm_head shares the token embedding
  bool attn_only = false;                  // blocks without ln_2 and MLP
  double init_std = 0.02;                  // std of the weights at init (GPT-2's 0.02)

  int64_t head_size() const { return n_embd / n_head; }
  int64_t kv_heads() const { return n_kv_head > 0 ? n_kv_head : n_head; }
  // SwiGLU's hidden width: 8C/3 rounded up to a multiple of 8, so that its three matrices
  // hold about the parameters of GELU's two C x 4C ones.
  int64_t swiglu_hidden() const { return (8 * n_embd / 3 + 7) / 8 * 8; }
  // Positions that never enter the residual stream (rope, none): cached keys and values stay
  // valid when the window slides, so a KV cache can drop its oldest position and go on.
  bool relative_positions() const { return pos_encoding == "rope" || pos_encoding == "none"; }

  // Throws std::invalid_argument naming the field ("model.n_head ...") and the allowed range.
  void validate() const;
};

}  // namespace tinylm
