#pragma once
// The logit lens: read the residual stream after each layer as if it were the last, through
// ln_f and the unembedding, and see what the model would predict there. Stage 0 is the
// embedding (blocks.0.hook_resid_pre), stage l + 1 is blocks.l.hook_resid_post; the last
// stage is the model's own prediction.

#include <cstdint>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "model/gpt.h"

namespace tinylm {

struct LogitLens {
  std::vector<std::string> stages;  // "embed", "block 0", ..., "block L-1"
  torch::Tensor top_ids;            // (L + 1, T, k) int64, most probable first
  torch::Tensor top_probs;          // (L + 1, T, k)
};

// tokens: (1, T).
LogitLens logit_lens(GPT& model, const torch::Tensor& tokens, int64_t k = 5);

}  // namespace tinylm
