#include "model/block.h"

#include <ATen/record_function.h>

#include "model/kernels/kernel_choice.h"
#include "model/kernels/swiglu.h"

namespace tinylm {

MLPImpl::MLPImpl(const ModelConfig& config, const HookScope& scope)
    : scope_(scope),
      gated_(config.mlp == MlpKind::kSwiglu),
      gelu_approximation_(config.mlp == MlpKind::kGeluTanh ? "tanh" : "none"),
      dropout_(config.dropout) {
  const int64_t C = config.n_embd, H = gated_ ? config.swiglu_hidden() : 4 * C;
  c_fc = register_module("c_fc", Linear(C, gated_ ? 2 * H : H, config.bias));
  c_proj = register_module("c_proj", Linear(H, C, config.bias));
}

torch::Tensor MLPImpl::forward(const torch::Tensor& x) {
  torch::Tensor post;  // (B, T, 4C or H)
  const bool watched = hook_pre.has_hooks() || hook_pre_linear.has_hooks() || hook_post.has_hooks();
  if (gated_ && !watched && fused_kernel_takes(x)) {
    const torch::Tensor gate_up = c_fc(x);  // (B, T, 2H)
    RECORD_USER_SCOPE("tinylm::activation");
    post = fused_swiglu(gate_up);
  } else if (gated_) {
    const auto gate_up = c_fc(x).chunk(2, -1);        // 2 x (B, T, H)
    const torch::Tensor gate = hook_pre(gate_up[0]);  // in this order: the hooks fire in turn
    RECORD_USER_SCOPE("tinylm::activation");          // a profiler's category
    post = torch::silu(gate) * hook_pre_linear(gate_up[1]);
  } else {
    const torch::Tensor pre = hook_pre(c_fc(x));
    RECORD_USER_SCOPE("tinylm::activation");
    post = torch::gelu(pre, gelu_approximation_);
  }
  torch::Tensor y = c_proj(hook_post(post));  // (B, T, C)
  if (is_training() && dropout_ > 0.0) y = torch::dropout(y, dropout_, true);
  return y;
}

BlockImpl::BlockImpl(const ModelConfig& config, const HookScope& scope, int64_t layer)
    : scope_(scope),
      has_mlp_(!config.attn_only),
      ln_1(register_module("ln_1", Norm(config.n_embd, config.bias, config.norm))),
      attn(register_module("attn", CausalSelfAttention(config, scope / "attn", layer))),
      ln_2(has_mlp_ ? register_module("ln_2", Norm(config.n_embd, config.bias, config.norm))
                    : Norm(nullptr)),
      mlp(has_mlp_ ? register_module("mlp", MLP(config, scope / "mlp")) : MLP(nullptr)) {}

torch::Tensor BlockImpl::forward(torch::Tensor x, KVCache* cache) {
  x = hook_resid_pre(x);
  x = x + hook_attn_out(attn(ln_1->forward_to_linear(x), cache));
  if (!mlp) return hook_resid_post(x);
  x = hook_resid_mid(x);
  x = x + hook_mlp_out(mlp(ln_2->forward_to_linear(x)));
  return hook_resid_post(x);
}

}  // namespace tinylm
