#pragma once
// One pre-norm transformer block: x + attn(ln_1(x)), then + mlp(ln_2(x)), the norms
// LayerNorm or RMSNorm (model/norm.h). The MLP (model.mlp):
//   gelu    c_proj(GELU(c_fc x)), c_fc (4C, C), c_proj (C, 4C): GPT-2's;
//   swiglu  c_proj(SiLU(gate) * up) with [gate; up] = c_fc x, c_fc (2H, C), c_proj (C, H),
//           H = ModelConfig::swiglu_hidden() (about 8C/3): LLaMA's, same parameter count.
// With model.attn_only the block is attention alone (no ln_2, no MLP), as in the
// induction-head literature. Submodule names follow nanoGPT. Hook points, all (B, T, C) but
// the MLP's (B, T, 4C or H): blocks.L.hook_resid_pre, hook_attn_out, hook_resid_mid,
// mlp.hook_pre (before the activation; SwiGLU's gate), mlp.hook_pre_linear (SwiGLU's up
// only), mlp.hook_post (what c_proj reads), hook_mlp_out, hook_resid_post; an
// attention-only block has no hook_resid_mid and no MLP hooks.

#include <vector>

#include <torch/torch.h>

#include "model/attention.h"
#include "model/config.h"
#include "model/hook_point.h"
#include "model/linear.h"
#include "model/kv_cache.h"
#include "model/norm.h"

namespace tinylm {

class MLPImpl : public torch::nn::Module {
 public:
  MLPImpl(const ModelConfig& config, int64_t layer);
  torch::Tensor forward(const torch::Tensor& x);  // (B, T, C) -> (B, T, C)

  Linear c_fc{nullptr};    // (4C, C), or (2H, C) for SwiGLU
  Linear c_proj{nullptr};  // (C, 4C), or (C, H)
  HookPoint hook_pre, hook_pre_linear, hook_post;  // (B, T, 4C or H); hook_pre_linear: SwiGLU

  bool gated() const { return gated_; }

 private:
  double dropout_;
  bool gated_;
};
TORCH_MODULE(MLP);

class BlockImpl : public torch::nn::Module {
 public:
  BlockImpl(const ModelConfig& config, int64_t layer);
  // (B, T, C) -> (B, T, C); the cache as in CausalSelfAttentionImpl::forward.
  torch::Tensor forward(torch::Tensor x, KVCache* cache = nullptr);

  // Every hook point of this block, attention's and the MLP's included.
  std::vector<HookPoint*> hook_points();

  Norm ln_1{nullptr};
  CausalSelfAttention attn{nullptr};
  Norm ln_2{nullptr};  // null when attention-only
  MLP mlp{nullptr};         // null when attention-only
  HookPoint hook_resid_pre, hook_attn_out, hook_resid_mid, hook_mlp_out, hook_resid_post;
};
TORCH_MODULE(Block);

}  // namespace tinylm
