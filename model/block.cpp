#include "model/block.h"

namespace tinylm {

MLPImpl::MLPImpl(const ModelConfig& config, int64_t layer)
    : hook_pre(hook_name(layer, "mlp.hook_pre")),
      hook_post(hook_name(layer, "mlp.hook_post")),
      dropout_(config.dropout) {
  const int64_t C = config.n_embd;
  c_fc = register_module("c_fc",
                         torch::nn::Linear(torch::nn::LinearOptions(C, 4 * C).bias(config.bias)));
  c_proj = register_module(
      "c_proj", torch::nn::Linear(torch::nn::LinearOptions(4 * C, C).bias(config.bias)));
}

torch::Tensor MLPImpl::forward(const torch::Tensor& x) {
  const torch::Tensor pre = hook_pre(c_fc(x));            // (B, T, 4C)
  torch::Tensor y = c_proj(hook_post(torch::gelu(pre)));  // (B, T, C)
  if (is_training() && dropout_ > 0.0) y = torch::dropout(y, dropout_, true);
  return y;
}

BlockImpl::BlockImpl(const ModelConfig& config, int64_t layer)
    : hook_resid_pre(hook_name(layer, "hook_resid_pre")),
      hook_attn_out(hook_name(layer, "hook_attn_out")),
      hook_resid_mid(hook_name(layer, "hook_resid_mid")),
      hook_mlp_out(hook_name(layer, "hook_mlp_out")),
      hook_resid_post(hook_name(layer, "hook_resid_post")) {
  ln_1 = register_module("ln_1", LayerNorm(config.n_embd, config.bias));
  attn = register_module("attn", CausalSelfAttention(config, layer));
  if (!config.attn_only) {
    ln_2 = register_module("ln_2", LayerNorm(config.n_embd, config.bias));
    mlp = register_module("mlp", MLP(config, layer));
  }
}

torch::Tensor BlockImpl::forward(torch::Tensor x) {
  x = hook_resid_pre(x);
  x = x + hook_attn_out(attn(ln_1(x)));
  if (!mlp) return hook_resid_post(x);
  x = hook_resid_mid(x);
  x = x + hook_mlp_out(mlp(ln_2(x)));
  return hook_resid_post(x);
}

std::vector<HookPoint*> BlockImpl::hook_points() {
  // In the order the forward pass reaches them.
  std::vector<HookPoint*> points = {&hook_resid_pre, &attn->hook_q, &attn->hook_k, &attn->hook_v};
  if (attn->rotary()) points.insert(points.end(), {&attn->hook_rot_q, &attn->hook_rot_k});
  points.insert(points.end(), {&attn->hook_scores, &attn->hook_pattern, &attn->hook_z, &hook_attn_out});
  if (mlp) {
    points.insert(points.end(), {&hook_resid_mid, &mlp->hook_pre, &mlp->hook_post,
                                 &hook_mlp_out});
  }
  points.push_back(&hook_resid_post);
  return points;
}

}  // namespace tinylm
