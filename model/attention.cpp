#include "model/attention.h"

#include <cmath>
#include <limits>

#include "model/batched_matmul.h"

namespace tinylm {

AttentionResult attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                          bool causal, double dropout, bool training) {
  const int64_t T = q.size(-2);
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  const torch::Tensor qk = batched_matmul(q, k.transpose(-2, -1));  // (B, nh, T, T)
  torch::Tensor scores;
  if (causal) {
    // M as an additive bias (0 on and below the diagonal, -inf above), added in the same
    // pass as the scaling: cheaper than masked_fill forward and backward, and the same numbers.
    const torch::Tensor bias = torch::full({T, T}, -std::numeric_limits<float>::infinity(),
                                           q.options().requires_grad(false))
                                   .triu(1);
    scores = torch::add(bias, qk, scale);  // (B, nh, T, T)
  } else {
    scores = qk * scale;
  }
  torch::Tensor pattern = torch::softmax(scores, -1);  // (B, nh, T, T)
  torch::Tensor attended = pattern;
  if (training && dropout > 0.0) attended = torch::dropout(pattern, dropout, true);
  torch::Tensor z = batched_matmul(attended, v);  // (B, nh, T, hs)
  return {scores, pattern, z};
}

CausalSelfAttentionImpl::CausalSelfAttentionImpl(const ModelConfig& config)
    : n_head_(config.n_head), dropout_(config.dropout) {
  const int64_t C = config.n_embd;
  c_attn = register_module(
      "c_attn", torch::nn::Linear(torch::nn::LinearOptions(C, 3 * C).bias(config.bias)));
  c_proj = register_module(
      "c_proj", torch::nn::Linear(torch::nn::LinearOptions(C, C).bias(config.bias)));
}

torch::Tensor CausalSelfAttentionImpl::forward(const torch::Tensor& x) {
  const int64_t B = x.size(0), T = x.size(1), C = x.size(2), hs = C / n_head_;
  const auto qkv = c_attn(x).split(C, 2);                          // 3 x (B, T, C)
  const auto heads = [&](const torch::Tensor& t) {                // (B, nh, T, hs)
    return t.view({B, T, n_head_, hs}).transpose(1, 2);
  };
  const AttentionResult a =
      attention(heads(qkv[0]), heads(qkv[1]), heads(qkv[2]), true, dropout_, is_training());
  torch::Tensor y = a.z.transpose(1, 2).contiguous().view({B, T, C});  // (B, T, C)
  y = c_proj(y);
  if (is_training() && dropout_ > 0.0) y = torch::dropout(y, dropout_, true);
  return y;
}

}  // namespace tinylm
