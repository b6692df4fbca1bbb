#pragma once
// Two ways to measure loss. score_tokens is exact and deterministic: consecutive,
// non-overlapping windows of at most block_size inputs, so every token after the first is
// predicted exactly once. estimate_loss is nanoGPT's cheap estimate during training: the
// mean loss of `iters` random batches.

#include <cstdint>

#include <torch/torch.h>

#include "data/batches.h"
#include "model/gpt.h"

namespace tinylm {

struct Score {
  double loss = 0.0;   // mean nats per predicted token
  int64_t tokens = 0;  // tokens predicted (N - 1 for N tokens)
};

// tokens: (N,) int64 with N >= 2.
Score score_tokens(GPT& model, const torch::Tensor& tokens, int64_t windows_per_batch = 32);

double estimate_loss(GPT& model, const BatchSampler& sampler, int64_t iters,
                     torch::Generator& generator);

// Mean cross entropy of logits (B, T, V) against targets (B, T).
torch::Tensor next_token_loss(const torch::Tensor& logits, const torch::Tensor& targets);

}  // namespace tinylm
