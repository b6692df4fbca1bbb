#pragma once
// What W_Q, W_K and W_V learned before any content arrives: a head's "priors", read from
// the weights alone, one block at a time through its ln_1 (biases included; for layers
// above 0 this is the direct path, as if the residual stream held only what is fed in).
//   position scores  S[i, j] = q(p_i) . k(p_j) / sqrt(hs) + M[i, j], with x = ln_1(p) for the
//                    position vectors p, and the causal mask M; their softmax is the pattern
//                    the head would draw from positions alone, and its previous-token score.
//                    With rotary, relative or alibi positions nothing is added to the
//                    stream: x = ln_1(mean token embedding) stands at every position, and
//                    q, k are rotated to positions i and j (rope: q . R(j - i) k, a
//                    function of i - j), or the score bias b_h(i - j) is added.
//   token scores     S[a, b] = q(e_a) . k(e_b) / sqrt(hs) for token embeddings e (no mask).
//   OV circuit       M = v(e) W_O^h C diag(g_f) W_U^T (V x V): what token a, once attended to,
//                    adds to each next-token logit; C centres (ln_f's mean; identity for
//                    RMSNorm), g_f is ln_f's weight and ln_f's scale is left out (positive,
//                    it changes no ratio). With grouped-query attention a head's W_K and
//                    W_V are its group's.
//                    copying = trace(M) / sum |eigenvalues(M)|, in [-1, 1] (1: a pure copier);
//                    top1 = fraction of tokens a whose own logit M[a, a] is the row's largest.

#include <cstdint>

#include <torch/torch.h>

#include "model/gpt.h"

namespace tinylm {

struct Priors {
  torch::Tensor position_scores;          // (L, nh, P, P), P = min(block_size, max_positions);
                                          // undefined with pos_encoding = none
  torch::Tensor position_pattern;         // (L, nh, P, P) softmax of the scores
  torch::Tensor position_previous_token;  // (L, nh) previous-token score of that pattern
  torch::Tensor token_scores;             // (L, nh, V, V) when V <= max_vocab, else undefined
  torch::Tensor ov_copying;               // (L, nh)
  torch::Tensor ov_top1;                  // (L, nh); undefined unless asked for
};

// `ov_top1`: also the top-1 fractions, which read the whole V x V circuit (the rest reads
// hs x hs matrices, or V x V only up to max_vocab).
Priors head_priors(GPT& model, int64_t max_positions = 64, int64_t max_vocab = 128,
                   bool ov_top1 = true);

}  // namespace tinylm
