#pragma once
// One pre-norm transformer block: x + attn(ln_1(x)), then + mlp(ln_2(x)), the norms
// LayerNorm or RMSNorm (model/norm.h). The MLP (model.mlp):
//   gelu    c_proj(GELU(c_fc x)), c_fc (4C, C), c_proj (C, 4C): nanoGPT's (exact, erf);
//   gelu_tanh  the same with GELU's tanh approximation: GPT-2's own;
//   swiglu  c_proj(SiLU(gate) * up) with [gate; up] = c_fc x, c_fc (2H, C), c_proj (C, H),
//           H = ModelConfig::swiglu_hidden() (about 8C/3): LLaMA's, same parameter count.
// With model.attn_only the block is attention alone (no ln_2, no MLP), as in the
// induction-head literature. Submodule names follow nanoGPT. Hook points, all (B, T, C) but
// the MLP's (B, T, 4C or H): blocks.L.hook_resid_pre, hook_attn_out, hook_resid_mid,
// mlp.hook_pre (before the activation; SwiGLU's gate), mlp.hook_pre_linear (SwiGLU's up
// only), mlp.hook_post (what c_proj reads), hook_mlp_out, hook_resid_post; an
// attention-only block has no hook_resid_mid and no MLP hooks.

#include <torch/torch.h>

#include "model/attention.h"
#include "model/config.h"
#include "model/hook_point.h"
#include "model/kv_cache.h"
#include "model/linear.h"
#include "model/norm.h"

namespace tinylm {

class MLPImpl : public torch::nn::Module {
  HookScope scope_;  // first: the hook points below are built from these
  bool gated_;

 public:
  MLPImpl(const ModelConfig& config, const HookScope& scope);
  torch::Tensor forward(const torch::Tensor& x);  // (B, T, C) -> (B, T, C)

  Linear c_fc{nullptr};    // (4C, C), or (2H, C) for SwiGLU
  Linear c_proj{nullptr};  // (C, 4C), or (C, H)
  // In forward order, (B, T, 4C or H).
  HookPoint hook_pre{scope_, "hook_pre"};
  HookPoint hook_pre_linear{scope_, "hook_pre_linear", gated_};  // SwiGLU's up
  HookPoint hook_post{scope_, "hook_post"};

  bool gated() const { return gated_; }
  // GELU's `approximate` argument in LibTorch: "none" (erf) or "tanh".
  const char* gelu_approximation() const { return gelu_approximation_; }

 private:
  const char* gelu_approximation_;
  double dropout_;
};
TORCH_MODULE(MLP);

class BlockImpl : public torch::nn::Module {
  HookScope scope_;  // first: the members below are built from these
  bool has_mlp_;

 public:
  // `scope` is the block's: blocks.{layer}.
  BlockImpl(const ModelConfig& config, const HookScope& scope, int64_t layer);
  // (B, T, C) -> (B, T, C); the cache as in CausalSelfAttentionImpl::forward.
  torch::Tensor forward(torch::Tensor x, KVCache* cache = nullptr);

  // Submodules and hook points in forward order: the order they are built and listed in.
  HookPoint hook_resid_pre{scope_, "hook_resid_pre"};
  Norm ln_1;
  CausalSelfAttention attn;
  HookPoint hook_attn_out{scope_, "hook_attn_out"};
  HookPoint hook_resid_mid{scope_, "hook_resid_mid", has_mlp_};
  Norm ln_2;  // null when attention-only
  MLP mlp;    // null when attention-only
  HookPoint hook_mlp_out{scope_, "hook_mlp_out", has_mlp_};
  HookPoint hook_resid_post{scope_, "hook_resid_post"};
};
TORCH_MODULE(Block);

}  // namespace tinylm
