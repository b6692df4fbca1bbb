#include "model/attention.h"

#include <cmath>
#include <limits>

#include <ATen/record_function.h>
#include <torch/version.h>

#include "model/kernels/causal_attention.h"
#include "model/kernels/kernel_choice.h"
#include "model/ops/batched_matmul.h"

namespace tinylm {

torch::Tensor attention_scores(const torch::Tensor& q, const torch::Tensor& k, bool causal,
                               const torch::Tensor& bias) {
  const int64_t T = q.size(-2), Tk = k.size(-2);
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  const torch::Tensor qk = batched_matmul(q, k.transpose(-2, -1));  // (B, nh, T, Tk)
  torch::Tensor added = bias;                                       // (nh, T, Tk) or undefined
  if (causal && T > 1) {
    // M as an additive bias (0 on and below the shifted diagonal, -inf above), added in the
    // same pass as the scaling: cheaper than masked_fill forward and backward, same numbers.
    const torch::Tensor mask = torch::full({T, Tk}, -std::numeric_limits<float>::infinity(),
                                           qk.options().requires_grad(false))
                                   .triu(Tk - T + 1);
    added = added.defined() ? added + mask : mask;
  }
  // One query without a bias sees every key: nothing to add.
  return added.defined() ? torch::add(added, qk, scale) : qk * scale;  // (B, nh, T, Tk)
}

AttentionResult attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                          bool causal, double dropout, bool training, const AttentionHooks& hooks,
                          const torch::Tensor& bias) {
  RECORD_USER_SCOPE("tinylm::attention");  // a profiler's category (train/step_profile.h)
  const auto hooked = [](const HookPoint* point, torch::Tensor x) {
    return point ? (*point)(x) : x;
  };
#if TORCH_VERSION_MAJOR >= 2
  // On CUDA, when no hook reads or replaces the scores or the pattern, the fused kernel
  // (flash or memory-efficient attention) computes z without ever storing the T x T
  // matrices; scores and pattern are then left undefined. Its causal mask is aligned to the
  // top left, which is ours only when there is no cache (T == Tk) or one query (no mask). A
  // score bias takes the explicit path.
  const auto watched = [](const HookPoint* point) { return point && point->has_hooks(); };
  const int64_t T = q.size(-2), Tk = k.size(-2);
  if (q.is_cuda() && !watched(hooks.scores) && !watched(hooks.pattern) && !bias.defined() &&
      (T == Tk || T == 1)) {
    torch::Tensor z = at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{},
                                                       training ? dropout : 0.0, causal && T > 1);
    return {torch::Tensor(), torch::Tensor(), hooked(hooks.z, z)};  // z (B, nh, T, hs)
  }
#endif
  torch::Tensor scores =
      hooked(hooks.scores, attention_scores(q, k, causal, bias));             // (B, nh, T, T)
  torch::Tensor pattern = hooked(hooks.pattern, torch::softmax(scores, -1));  // (B, nh, T, T)
  torch::Tensor attended = pattern;
  if (training && dropout > 0.0) attended = torch::dropout(pattern, dropout, true);
  torch::Tensor z = hooked(hooks.z, batched_matmul(attended, v));  // (B, nh, T, hs)
  return {scores, pattern, z};
}

CausalSelfAttentionImpl::CausalSelfAttentionImpl(const ModelConfig& config, const HookScope& scope,
                                                 int64_t layer)
    : scope_(scope),
      rotary_(config.positions().rotates),
      layer_(layer),
      n_head_(config.n_head),
      n_kv_head_(config.kv_heads()),
      dropout_(config.dropout) {
  const int64_t C = config.n_embd, kv = n_kv_head_ * config.head_size();
  c_attn = register_module("c_attn", Linear(C, C + 2 * kv, config.bias));
  c_proj = register_module("c_proj", Linear(C, C, config.bias));
  if (rotary_) {
    const RopeTables tables = rope_tables(config.block_size, config.head_size());
    // Buffers follow .to(device); checkpoints hold parameters only.
    rope_.cos = register_buffer("rope_cos", tables.cos);
    rope_.sin = register_buffer("rope_sin", tables.sin);
    rope_.cos_full = register_buffer("rope_cos_full", tables.cos_full);
    rope_.sin_signed = register_buffer("rope_sin_signed", tables.sin_signed);
  }
  if (config.pos_encoding == PosEncoding::kRelative) {
    rel_bias = register_module(
        "rel_bias", RelativeBias(config.n_head, config.num_buckets, config.max_distance));
  }
  if (config.pos_encoding == PosEncoding::kAlibi) {
    alibi_slopes_ = register_buffer(
        "alibi_slopes",
        torch::tensor(tinylm::alibi_slopes(config.n_head), torch::kFloat64).to(torch::kFloat32));
  }
}

torch::Tensor CausalSelfAttentionImpl::score_bias(int64_t T, int64_t Tk) const {
  if (rel_bias) return rel_bias->forward(T, Tk);  // (nh, T, Tk)
  if (!alibi_slopes_.defined()) return {};
  const torch::Tensor d = query_key_distances(T, Tk, alibi_slopes_.device()).to(torch::kFloat32);
  return -alibi_slopes_.view({-1, 1, 1}) * d;  // (nh, T, Tk)
}

CausalSelfAttentionImpl::Heads CausalSelfAttentionImpl::project(const torch::Tensor& x) {
  const int64_t B = x.size(0), T = x.size(1), C = x.size(2), hs = C / n_head_;
  const auto qkv = c_attn(x).split_with_sizes({C, n_kv_head_ * hs, n_kv_head_ * hs}, 2);
  const auto heads = [&](const torch::Tensor& t, int64_t n) {  // (B, T, n hs) -> (B, n, T, hs)
    return t.view({B, T, n, hs}).transpose(1, 2);
  };
  return {heads(qkv[0], n_head_), heads(qkv[1], n_kv_head_), heads(qkv[2], n_kv_head_)};
}

torch::Tensor CausalSelfAttentionImpl::expand_kv(const torch::Tensor& t) const {
  if (n_kv_head_ == n_head_) return t;
  return t.repeat_interleave(n_head_ / n_kv_head_, 1);  // (B, nh, T, hs)
}

bool CausalSelfAttentionImpl::watched() const {
  for (const HookPoint* point : {&hook_q, &hook_k, &hook_v, &hook_rot_q, &hook_rot_k, &hook_scores,
                                 &hook_pattern, &hook_z}) {
    if (point->has_hooks()) return true;
  }
  return false;
}

torch::Tensor CausalSelfAttentionImpl::forward(const torch::Tensor& x, KVCache* cache) {
  const int64_t B = x.size(0), T = x.size(1), C = x.size(2);
  // The fused kernel where nothing needs its intermediates: no hook inside, no cache, no
  // dropout on the pattern, no score bias.
  if (!cache && !watched() && !(is_training() && dropout_ > 0.0) && !has_score_bias() &&
      fused_kernel_takes(x)) {
    const torch::Tensor qkv = c_attn(x);  // (B, T, C + 2 n_kv hs)
    // A window past block_size (an evaluation at a longer context) needs more angles.
    const RopeTables longer =
        rotary() && T > rope_.cos.size(0) ? rope_tables(T, C / n_head_) : RopeTables{};
    const RopeTables& angles = longer.cos.defined() ? longer : rope_;
    torch::Tensor y;  // (B, T, C)
    {
      RECORD_USER_SCOPE("tinylm::attention");
      y = fused_causal_attention(qkv, n_head_, n_kv_head_, angles.cos, angles.sin);
    }
    return c_proj(y);
  }
  Heads h = project(x);
  torch::Tensor q = hook_q(h.q), k = hook_k(h.k), v = hook_v(h.v);
  if (rotary()) {
    const int64_t first = cache ? cache->next_position() : 0;
    q = hook_rot_q(apply_rope(q, rope_, first));
    k = hook_rot_k(apply_rope(k, rope_, first));
  }
  if (cache)
    std::tie(k, v) = cache->append(static_cast<size_t>(layer_), k, v);  // (B, n_kv, Tk, hs)
  const torch::Tensor z =
      attention(q, expand_kv(k), expand_kv(v), true, dropout_, is_training(),
                {&hook_scores, &hook_pattern, &hook_z}, score_bias(T, k.size(2)))
          .z;                                                        // (B, nh, T, hs)
  torch::Tensor y = z.transpose(1, 2).contiguous().view({B, T, C});  // (B, T, C)
  y = c_proj(y);
  if (is_training() && dropout_ > 0.0) y = torch::dropout(y, dropout_, true);
  return y;
}

}  // namespace tinylm
