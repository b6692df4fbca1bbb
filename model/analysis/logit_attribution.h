#pragma once
// Direct logit attribution: how much each part of the model adds, directly, to the logit of
// the token that comes next. The residual stream before ln_f is a sum of parts,
//     x = embed + sum over layers l (sum over heads h of z_lh W_O^h  +  b_proj_l  +  mlp_l),
// embed being blocks.0.hook_resid_pre (tokens and absolute positions), z_lh the head's
// hook_z, W_O^h its columns of c_proj, b_proj_l c_proj's bias and mlp_l hook_mlp_out. With
// ln_f's scale s held at its value on this input, ln_f is linear in x:
//     ln_f(x) = (C x) / s * g + b,   C the centring (LayerNorm; identity for RMSNorm),
// so part p adds  ((C p) / s * g) . u_y  to the logit of token y, u_y its row of the
// unembedding, and the parts plus b . u_y make the logit exactly.

#include <torch/torch.h>

#include "model/activation_cache.h"
#include "model/gpt.h"

namespace tinylm {

struct LogitAttribution {
  torch::Tensor targets;  // (T - 1,) int64: the token after each position
  torch::Tensor heads;    // (T - 1, L, nh) float64: each head's part of the target's logit
  torch::Tensor mlps;     // (T - 1, L); NaN where a block has no MLP
  torch::Tensor embed;    // (T - 1,)
  torch::Tensor biases;   // (T - 1,): c_proj's biases of every layer, and ln_f's b . u_y
  torch::Tensor logits;   // (T - 1,): the model's own logit of the target
};

// tokens: (T,) int64, 2 <= T <= block_size. Parts are per position; sum over dimension 0
// for the whole text.
LogitAttribution logit_attribution(GPT& model, const torch::Tensor& tokens);

// The same from a pass over `tokens` that kept the points logit_attribution_points()
// selects, so that one forward pass serves attribution and the other views of a prompt.
HookFilter logit_attribution_points();
LogitAttribution logit_attribution(GPT& model, const CachedRun& run, const torch::Tensor& tokens);

}  // namespace tinylm
