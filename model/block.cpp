#include "model/block.h"

namespace tinylm {

MLPImpl::MLPImpl(const ModelConfig& config, int64_t layer)
    : hook_pre(hook_name(layer, "mlp.hook_pre")),
      hook_pre_linear(hook_name(layer, "mlp.hook_pre_linear")),
      hook_post(hook_name(layer, "mlp.hook_post")),
      dropout_(config.dropout),
      gated_(config.mlp == "swiglu") {
  const int64_t C = config.n_embd, H = gated_ ? config.swiglu_hidden() : 4 * C;
  c_fc = register_module("c_fc", Linear(C, gated_ ? 2 * H : H, config.bias));
  c_proj = register_module(
      "c_proj", Linear(H, C, config.bias));
}

torch::Tensor MLPImpl::forward(const torch::Tensor& x) {
  torch::Tensor post;  // (B, T, 4C or H)
  if (gated_) {
    const auto gate_up = c_fc(x).chunk(2, -1);  // 2 x (B, T, H)
    const torch::Tensor gate = hook_pre(gate_up[0]);  // in this order: the hooks fire in turn
    post = torch::silu(gate) * hook_pre_linear(gate_up[1]);
  } else {
    post = torch::gelu(hook_pre(c_fc(x)));
  }
  torch::Tensor y = c_proj(hook_post(post));  // (B, T, C)
  if (is_training() && dropout_ > 0.0) y = torch::dropout(y, dropout_, true);
  return y;
}

BlockImpl::BlockImpl(const ModelConfig& config, int64_t layer)
    : hook_resid_pre(hook_name(layer, "hook_resid_pre")),
      hook_attn_out(hook_name(layer, "hook_attn_out")),
      hook_resid_mid(hook_name(layer, "hook_resid_mid")),
      hook_mlp_out(hook_name(layer, "hook_mlp_out")),
      hook_resid_post(hook_name(layer, "hook_resid_post")) {
  ln_1 = register_module("ln_1", Norm(config.n_embd, config.bias, config.norm));
  attn = register_module("attn", CausalSelfAttention(config, layer));
  if (!config.attn_only) {
    ln_2 = register_module("ln_2", Norm(config.n_embd, config.bias, config.norm));
    mlp = register_module("mlp", MLP(config, layer));
  }
}

torch::Tensor BlockImpl::forward(torch::Tensor x, KVCache* cache) {
  x = hook_resid_pre(x);
  x = x + hook_attn_out(attn(ln_1(x), cache));
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
    points.insert(points.end(), {&hook_resid_mid, &mlp->hook_pre});
    if (mlp->gated()) points.push_back(&mlp->hook_pre_linear);
    points.insert(points.end(), {&mlp->hook_post, &hook_mlp_out});
  }
  points.push_back(&hook_resid_post);
  return points;
}

}  // namespace tinylm
