#include "model/attention.h"

#include <cmath>
#include <limits>

#include "model/batched_matmul.h"

namespace tinylm {

torch::Tensor attention_scores(const torch::Tensor& q, const torch::Tensor& k, bool causal) {
  const int64_t T = q.size(-2);
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  const torch::Tensor qk = batched_matmul(q, k.transpose(-2, -1));  // (B, nh, T, T)
  if (causal) {
    // M as an additive bias (0 on and below the diagonal, -inf above), added in the same
    // pass as the scaling: cheaper than masked_fill forward and backward, and the same numbers.
    const torch::Tensor bias = torch::full({T, T}, -std::numeric_limits<float>::infinity(),
                                           q.options().requires_grad(false))
                                   .triu(1);
    return torch::add(bias, qk, scale);  // (B, nh, T, T)
  }
  return qk * scale;
}

AttentionResult attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                          bool causal, double dropout, bool training, const AttentionHooks& hooks) {
  const auto hooked = [](const HookPoint* point, torch::Tensor x) { return point ? (*point)(x) : x; };
  torch::Tensor scores = hooked(hooks.scores, attention_scores(q, k, causal));  // (B, nh, T, T)
  torch::Tensor pattern = hooked(hooks.pattern, torch::softmax(scores, -1));     // (B, nh, T, T)
  torch::Tensor attended = pattern;
  if (training && dropout > 0.0) attended = torch::dropout(pattern, dropout, true);
  torch::Tensor z = hooked(hooks.z, batched_matmul(attended, v));  // (B, nh, T, hs)
  return {scores, pattern, z};
}

CausalSelfAttentionImpl::CausalSelfAttentionImpl(const ModelConfig& config, int64_t layer)
    : hook_q(hook_name(layer, "attn.hook_q")),
      hook_k(hook_name(layer, "attn.hook_k")),
      hook_v(hook_name(layer, "attn.hook_v")),
      hook_rot_q(hook_name(layer, "attn.hook_rot_q")),
      hook_rot_k(hook_name(layer, "attn.hook_rot_k")),
      hook_scores(hook_name(layer, "attn.hook_scores")),
      hook_pattern(hook_name(layer, "attn.hook_pattern")),
      hook_z(hook_name(layer, "attn.hook_z")),
      n_head_(config.n_head),
      dropout_(config.dropout) {
  const int64_t C = config.n_embd;
  c_attn = register_module(
      "c_attn", torch::nn::Linear(torch::nn::LinearOptions(C, 3 * C).bias(config.bias)));
  c_proj = register_module(
      "c_proj", torch::nn::Linear(torch::nn::LinearOptions(C, C).bias(config.bias)));
  if (config.pos_encoding == "rope") {
    const RopeTables tables = rope_tables(config.block_size, config.head_size());
    // Buffers follow .to(device); checkpoints hold parameters only.
    rope_.cos = register_buffer("rope_cos", tables.cos);
    rope_.sin = register_buffer("rope_sin", tables.sin);
  }
}

torch::Tensor CausalSelfAttentionImpl::forward(const torch::Tensor& x) {
  const int64_t B = x.size(0), T = x.size(1), C = x.size(2), hs = C / n_head_;
  const auto qkv = c_attn(x).split(C, 2);                          // 3 x (B, T, C)
  const auto heads = [&](const torch::Tensor& t) {                // (B, nh, T, hs)
    return t.view({B, T, n_head_, hs}).transpose(1, 2);
  };
  torch::Tensor q = hook_q(heads(qkv[0])), k = hook_k(heads(qkv[1]));
  const torch::Tensor v = hook_v(heads(qkv[2]));
  if (rotary()) {
    q = hook_rot_q(apply_rope(q, rope_));
    k = hook_rot_k(apply_rope(k, rope_));
  }
  const torch::Tensor z =
      attention(q, k, v, true, dropout_, is_training(), {&hook_scores, &hook_pattern, &hook_z}).z;
  torch::Tensor y = z.transpose(1, 2).contiguous().view({B, T, C});  // (B, T, C)
  y = c_proj(y);
  if (is_training() && dropout_ > 0.0) y = torch::dropout(y, dropout_, true);
  return y;
}

}  // namespace tinylm
