#pragma once
// The factors the weight-only analyses share (priors, token circuits): a block's q, k, v of
// given rows through its ln_1 and c_attn, and the unembedding with ln_f folded in.

#include <torch/torch.h>

#include "model/gpt.h"

namespace tinylm {

struct HeadProjections {
  torch::Tensor q, k, v;  // (nh, N, hs) each
};

// q, k, v of every head for the rows of x (N, C), taken through the block's ln_1 and c_attn
// (biases included); with grouped-query attention each head gets its group's k and v.
HeadProjections project_rows(Block& block, const torch::Tensor& x);

// W_U with ln_f folded in, (C, V): C diag(g_f) W_U^T, C the centring (identity for
// RMSNorm), g_f ln_f's weight; ln_f's scale (positive) is left out.
torch::Tensor folded_unembedding(GPT& model);

}  // namespace tinylm
