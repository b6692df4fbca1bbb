#pragma once
// Activation patching: run the corrupted text with one activation taken from the clean run,
// and measure how much of the clean run's answer comes back. At position P the clean answer
// a is the clean run's top next token, the corrupt answer b the corrupted run's; the metric
// is the logit difference LD = logit[a] - logit[b] at P, and a patch's score is
//     restored = (LD_patched - LD_corrupt) / (LD_clean - LD_corrupt),
// 0 for the corrupted run and 1 for the clean one. The sites, each patched alone:
//   - each head's z (blocks.L.attn.hook_z, that head, every position);
//   - each layer's resid_pre (blocks.L.hook_resid_pre) at each position;
//   - each layer's attn_out and mlp_out (every position).
// The patched runs go in batches, one copy of the corrupted text per site, each layer's
// sites run from that layer on, from the corrupted run's residual stream there (the
// layers below are the corrupted run's whatever is patched above them).
//
// Attribution patching (Nanda 2023) estimates every site at once, and each head at each
// position, to first order: restored ~ (a_clean - a_corrupt) . d LD / d a at the corrupted
// run, over the span (model/analysis/stream_gradients.h), from the clean run's cache and one
// corrupted pass with gradients. The exact runs are its reference; the result says how
// well the two rank the heads and the residual positions.

#include <cstdint>
#include <functional>
#include <string>

#include <torch/torch.h>

#include "model/analysis/rank_agreement.h"
#include "model/gpt.h"

namespace tinylm {

struct PatchingResult {
  int64_t position = 0;                          // P
  int64_t clean_answer = 0, corrupt_answer = 0;  // a, b
  double clean_diff = 0.0, corrupt_diff = 0.0;   // LD_clean, LD_corrupt
  torch::Tensor heads;                           // (L, nh) float64: restored by each head's z
  torch::Tensor resid_pre;                       // (L, T): by resid_pre at each position
  torch::Tensor attn_out;                        // (L,)
  torch::Tensor mlp_out;                         // (L,); NaN where a block has no MLP
  // Attribution patching's estimates of the same (normalised as `restored`), and of each
  // head at each position: (L, nh), (L, nh, T), (L, T), (L,), (L,).
  torch::Tensor heads_estimate, head_positions_estimate, resid_pre_estimate, attn_out_estimate,
      mlp_out_estimate;
  RankAgreement heads_agreement, resid_pre_agreement;  // exact against estimate
};

// How an error names a token: "token 17" unless the caller knows its text.
using TokenLabel = std::function<std::string(int64_t id)>;
inline std::string token_number(int64_t id) { return "token " + std::to_string(id); }

// Which sites run exactly: none (only the estimates; the exact tables stay zero), the
// layers' outputs (attn_out and mlp_out; the head and resid_pre tables stay zero and their
// agreement unset), or every site.
enum class ExactPatching { kNone, kLayerOutputs, kEverySite };

// clean, corrupt: (T,) int64 token ids of the same length, at most block_size; position in
// [0, T). Throws std::invalid_argument naming what is wrong: lengths that differ, a position
// outside the text, or runs that agree on the answer (there is no difference to restore).
PatchingResult activation_patching(GPT& model, const torch::Tensor& clean,
                                   const torch::Tensor& corrupt, int64_t position,
                                   int64_t batch_size = 64, const TokenLabel& label = token_number,
                                   ExactPatching exact = ExactPatching::kEverySite);

}  // namespace tinylm
