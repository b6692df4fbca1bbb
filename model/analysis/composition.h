#pragma once
// Composition scores (Elhage et al. 2021, "A Mathematical Framework for Transformer
// Circuits"; TransformerLens's all_composition_scores): how much of what head A writes into
// the residual stream a head B of a later layer reads with its queries (Q), its keys (K) or
// its values (V). With row vectors (x W), W_OV = W_V W_O and W_QK = W_Q W_K^T, all C x C:
//     score = ||W_A W_B||_F / (||W_A||_F ||W_B||_F),   W_A = W_OV of A,
//     W_B = W_QK of B (Q), W_QK^T of B (K), W_OV of B (V).
// B reads through its block's ln_1, so its W_Q, W_K and W_V are taken as diag(g) W, g being
// ln_1's weight; biases, the centring and the norm's scale are left out. With grouped-query
// attention a head's W_K and W_V are its group's. Pairs with A not in an earlier layer than
// B score 0.

#include <torch/torch.h>

#include "model/gpt.h"

namespace tinylm {

struct CompositionScores {
  torch::Tensor q, k, v;  // (L, nh, L, nh) float64: [layer A][head A][layer B][head B]
};

CompositionScores composition_scores(GPT& model);

}  // namespace tinylm
