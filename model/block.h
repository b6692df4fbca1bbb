#pragma once
// One pre-norm transformer block: x + attn(ln_1(x)), then + mlp(ln_2(x)); the MLP is
// Linear(C, 4C), exact GELU, Linear(4C, C). With model.attn_only the block is attention
// alone (no ln_2, no MLP), as in the induction-head literature. Submodule names follow
// nanoGPT. Hook points, all (B, T, C) but the MLP's (B, T, 4C): blocks.L.hook_resid_pre,
// hook_attn_out, hook_resid_mid, mlp.hook_pre (before GELU), mlp.hook_post, hook_mlp_out,
// hook_resid_post; an attention-only block has no hook_resid_mid and no MLP hooks.

#include <vector>

#include <torch/torch.h>

#include "model/attention.h"
#include "model/config.h"
#include "model/hook_point.h"
#include "model/layer_norm.h"

namespace tinylm {

class MLPImpl : public torch::nn::Module {
 public:
  MLPImpl(const ModelConfig& config, int64_t layer);
  torch::Tensor forward(const torch::Tensor& x);  // (B, T, C) -> (B, T, C)

  torch::nn::Linear c_fc{nullptr};    // (4C, C)
  torch::nn::Linear c_proj{nullptr};  // (C, 4C)
  HookPoint hook_pre, hook_post;      // (B, T, 4C)

 private:
  double dropout_;
};
TORCH_MODULE(MLP);

class BlockImpl : public torch::nn::Module {
 public:
  BlockImpl(const ModelConfig& config, int64_t layer);
  torch::Tensor forward(torch::Tensor x);  // (B, T, C) -> (B, T, C)

  // Every hook point of this block, attention's and the MLP's included.
  std::vector<HookPoint*> hook_points();

  LayerNorm ln_1{nullptr};
  CausalSelfAttention attn{nullptr};
  LayerNorm ln_2{nullptr};  // null when attention-only
  MLP mlp{nullptr};         // null when attention-only
  HookPoint hook_resid_pre, hook_attn_out, hook_resid_mid, hook_mlp_out, hook_resid_post;
};
TORCH_MODULE(Block);

}  // namespace tinylm
