#pragma once
// A head's OV and QK circuits in tokens: their top singular directions, as the tokens at the
// ends of each. Through the embedding E (V x C), with the same factors as the priors
// (model/analysis/priors.h):
//   OV   M = v(E) W_O^h C diag(g_f) W_U^T  (V x V): a direction reads tokens (left singular
//        vector: what the head attends to) and writes tokens (right: the logits it raises);
//   QK   M = q(E) k(E)^T / sqrt(hs)        (V x V): a direction pairs query tokens (left)
//        with key tokens (right).
// M has rank <= hs, so its SVD comes from hs x hs work: M = F G with F (V x hs) = Q_F R_F and
// G^T = Q_G R_G, R_F R_G^T = U S V^T, so M = (Q_F U) S (Q_G V)^T. Each vector's sign is
// chosen so that its largest entry in magnitude is positive.

#include <cstdint>
#include <vector>

#include <torch/torch.h>

#include "model/gpt.h"

namespace tinylm {

struct SingularDirections {
  torch::Tensor values;  // (k,) float64, largest first
  torch::Tensor share;   // (k,): each value squared over the sum of all squared (of ||M||_F^2)
  torch::Tensor left;    // (k, V): unit vectors over tokens
  torch::Tensor right;   // (k, V)
};

// The top k directions of M = F G, F (V, r), G (r, V'), float64.
SingularDirections top_singular_directions(const torch::Tensor& F, const torch::Tensor& G,
                                           int64_t k);

struct TokenCircuits {
  std::vector<std::vector<SingularDirections>> ov, qk;  // [layer][head]
};

TokenCircuits token_circuits(GPT& model, int64_t k = 3);

}  // namespace tinylm
