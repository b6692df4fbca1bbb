#pragma once
// Causal self-attention, written as the formula
//     O = softmax_row(Q K^T / sqrt(d_k) + M) V,   M_ij = 0 if j <= i, -inf otherwise
// so that the scores and the pattern are real tensors one can read. Heads are computed in
// one batched matmul; q, k and v come from one Linear (c_attn) stacked in that order:
// (C + 2 n_kv hs, C). With grouped-query attention (n_kv_head < n_head) each key/value head
// serves n_head / n_kv_head query heads in a row (query head h reads kv head h / group).
// Hook points (blocks.L.attn.*): hook_q (B, nh, T, hs), hook_k, hook_v (B, n_kv, T, hs),
// hook_scores and hook_pattern (B, nh, T, Tk), hook_z (B, nh, T, hs); with rotary positions
// also hook_rot_q and hook_rot_k, q and k after the rotation. Tk = T without a KV cache, the
// cached positions plus T with one. With relative or alibi positions the scores hold their
// bias (model/position_bias.h). On the CPU with no hook inside, no cache, no dropout and no
// score bias, the module's forward takes the fused kernel (model/kernels/causal_attention.h),
// the same numbers without the intermediates.

#include <torch/torch.h>

#include "model/config.h"
#include "model/hook_point.h"
#include "model/kv_cache.h"
#include "model/linear.h"
#include "model/position_bias.h"
#include "model/rope.h"

namespace tinylm {

// With LibTorch >= 2 on CUDA and no hook on the scores or the pattern, attention() takes
// at::scaled_dot_product_attention and leaves scores and pattern undefined.
struct AttentionResult {
  torch::Tensor scores;   // (B, nh, T, Tk) after scaling and the mask; Tk = T without a cache
  torch::Tensor pattern;  // (B, nh, T, Tk) rows sum to 1
  torch::Tensor z;        // (B, nh, T, hs) pattern @ v
};

// Q K^T / sqrt(d_k) + bias + M for q (B, nh, T, hs), k (B, nh, Tk, hs) -> (B, nh, T, Tk); M
// only with `causal`, the bias (nh, T, Tk) only when defined. When Tk > T the queries are the
// last T positions of the keys' (a KV cache): query i sees keys j <= Tk - T + i.
torch::Tensor attention_scores(const torch::Tensor& q, const torch::Tensor& k, bool causal,
                               const torch::Tensor& bias = {});

// Hook points to pass the scores, the pattern and z through, each optional: the module's
// forward pass is this same function with its hooks.
struct AttentionHooks {
  const HookPoint* scores = nullptr;
  const HookPoint* pattern = nullptr;
  const HookPoint* z = nullptr;
};

// q (B, nh, T, hs), k and v (B, nh, Tk, hs). With `causal`, position i sees positions j <= i only.
// Dropout on the pattern applies only when `training` and dropout > 0. `bias` as above.
AttentionResult attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                          bool causal, double dropout = 0.0, bool training = false,
                          const AttentionHooks& hooks = {}, const torch::Tensor& bias = {});

class CausalSelfAttentionImpl : public torch::nn::Module {
  // First: the hook points below are built from them.
  HookScope scope_;
  bool rotary_;

 public:
  // `layer` indexes the KV cache; `scope` names the hook points (blocks.L.attn.hook_q, ...).
  CausalSelfAttentionImpl(const ModelConfig& config, const HookScope& scope, int64_t layer);

  // (B, T, C) -> (B, T, C). With a cache, x holds the tokens after the cached ones, at
  // absolute positions from cache->next_position(); their keys and values join the cache.
  torch::Tensor forward(const torch::Tensor& x, KVCache* cache = nullptr);

  struct Heads {
    torch::Tensor q;  // (B, nh, T, hs)
    torch::Tensor k;  // (B, n_kv, T, hs)
    torch::Tensor v;  // (B, n_kv, T, hs)
  };
  // q, k and v of x (B, T, C), before rotation and before any hook.
  Heads project(const torch::Tensor& x);
  // k or v (B, n_kv, T, hs) -> (B, nh, T, hs), each kv head repeated for its query heads.
  torch::Tensor expand_kv(const torch::Tensor& t) const;

  Linear c_attn{nullptr};          // (C + 2 n_kv hs, C): q, k, v
  Linear c_proj{nullptr};          // (C, C)
  RelativeBias rel_bias{nullptr};  // pos_encoding = relative only

  // The positions' bias on the scores of queries at the last T of Tk positions (nh, T, Tk):
  // relative and alibi; undefined for the others.
  torch::Tensor score_bias(int64_t T, int64_t Tk) const;
  bool has_score_bias() const { return rel_bias || alibi_slopes_.defined(); }
  // ALiBi's slopes (nh,); undefined unless pos_encoding = alibi.
  const torch::Tensor& alibi_slopes() const { return alibi_slopes_; }

  // In forward order.
  HookPoint hook_q{scope_, "hook_q"};  // (B, nh, T, hs)
  HookPoint hook_k{scope_, "hook_k"};  // (B, n_kv, T, hs)
  HookPoint hook_v{scope_, "hook_v"};  // (B, n_kv, T, hs)
  HookPoint hook_rot_q{scope_, "hook_rot_q", rotary_};
  HookPoint hook_rot_k{scope_, "hook_rot_k", rotary_};
  HookPoint hook_scores{scope_, "hook_scores"};    // (B, nh, T, Tk)
  HookPoint hook_pattern{scope_, "hook_pattern"};  // (B, nh, T, Tk)
  HookPoint hook_z{scope_, "hook_z"};              // (B, nh, T, hs)

  bool rotary() const { return rotary_; }
  const RopeTables& rope() const { return rope_; }
  // Whether a hook is attached inside the attention (hook_q .. hook_z): then the explicit
  // path runs, never the fused kernel.
  bool watched() const;

 private:
  int64_t layer_;
  int64_t n_head_, n_kv_head_;
  double dropout_;
  RopeTables rope_;             // pos_encoding = rope only
  torch::Tensor alibi_slopes_;  // (nh,) pos_encoding = alibi only
};
TORCH_MODULE(CausalSelfAttention);

}  // namespace tinylm
