#pragma once
// Causal self-attention, written as the formula
//     O = softmax_row(Q K^T / sqrt(d_k) + M) V,   M_ij = 0 if j <= i, -inf otherwise
// so that the scores and the pattern are real tensors one can read. Heads are computed in
// one batched matmul; q, k and v come from one Linear (c_attn) stacked in that order.
// Hook points (blocks.L.attn.*): hook_q, hook_k, hook_v (B, nh, T, hs), hook_scores and
// hook_pattern (B, nh, T, T), hook_z (B, nh, T, hs); with rotary positions also
// hook_rot_q and hook_rot_k (B, nh, T, hs), q and k after the rotation.

#include <torch/torch.h>

#include "model/config.h"
#include "model/hook_point.h"
#include "model/rope.h"

namespace tinylm {

struct AttentionResult {
  torch::Tensor scores;   // (B, nh, T, T) after scaling and the mask
  torch::Tensor pattern;  // (B, nh, T, T) rows sum to 1
  torch::Tensor z;        // (B, nh, T, hs) pattern @ v
};

// Q K^T / sqrt(d_k) + M for q, k (B, nh, T, hs) -> (B, nh, T, T); M only with `causal`.
torch::Tensor attention_scores(const torch::Tensor& q, const torch::Tensor& k, bool causal);

// Hook points to pass the scores, the pattern and z through, each optional: the module's
// forward pass is this same function with its hooks.
struct AttentionHooks {
  const HookPoint* scores = nullptr;
  const HookPoint* pattern = nullptr;
  const HookPoint* z = nullptr;
};

// q, k, v: (B, nh, T, hs). With `causal`, position i sees positions j <= i only.
// Dropout on the pattern applies only when `training` and dropout > 0.
AttentionResult attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                          bool causal, double dropout = 0.0, bool training = false,
                          const AttentionHooks& hooks = {});

class CausalSelfAttentionImpl : public torch::nn::Module {
 public:
  // `layer` names the hook points: blocks.{layer}.attn.hook_q, ...
  CausalSelfAttentionImpl(const ModelConfig& config, int64_t layer);

  torch::Tensor forward(const torch::Tensor& x);  // (B, T, C) -> (B, T, C)

  torch::nn::Linear c_attn{nullptr};  // (3C, C): q, k, v
  torch::nn::Linear c_proj{nullptr};  // (C, C)

  HookPoint hook_q, hook_k, hook_v, hook_rot_q, hook_rot_k, hook_scores, hook_pattern, hook_z;

  bool rotary() const { return rope_.cos.defined(); }
  const RopeTables& rope() const { return rope_; }

 private:
  int64_t n_head_;
  double dropout_;
  RopeTables rope_;  // pos_encoding = rope only
};
TORCH_MODULE(CausalSelfAttention);

}  // namespace tinylm
