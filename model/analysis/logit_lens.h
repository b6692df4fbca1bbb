#pragma once
// The logit lens: read the residual stream after each layer as if it were the last, through
// ln_f and the unembedding, and see what the model would predict there. Stage 0 is the
// embedding (blocks.0.hook_resid_pre), stage l + 1 is blocks.l.hook_resid_post; the last
// stage is the model's own prediction.

#include <cstdint>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "model/activation_cache.h"
#include "model/gpt.h"

namespace tinylm {

struct LogitLens {
  std::vector<std::string> stages;  // "embed", "block 0", ..., "block L-1"
  torch::Tensor top_ids;            // (L + 1, T, k) int64, most probable first
  torch::Tensor top_probs;          // (L + 1, T, k)
  // The prompt's own next tokens at the last stage (the model's prediction): -log p of
  // token t + 1 after t + 1 tokens, in nats. (T - 1,) float64.
  torch::Tensor loss;
};

// tokens: (1, T).
LogitLens logit_lens(GPT& model, const torch::Tensor& tokens, int64_t k = 5);

// The same from a cache of `tokens` that holds the points logit_lens_points() selects, so
// that one forward pass serves the lens and other views of the same prompt.
HookFilter logit_lens_points();
LogitLens logit_lens(GPT& model, const ActivationCache& cache, const torch::Tensor& tokens,
                     int64_t k = 5);

}  // namespace tinylm
