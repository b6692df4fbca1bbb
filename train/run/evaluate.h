#pragma once
// Loss as `eval` measures it: score_tokens is exact and deterministic: consecutive,
// non-overlapping windows of at most `context` inputs (block_size by default; more where the
// positions extrapolate), so every token after the first is predicted exactly once. Training's
// cheap estimate is train/estimate_loss.h.

#include <cstdint>

#include <torch/torch.h>

#include "data/batches.h"
#include "model/gpt.h"

namespace tinylm {

struct Score {
  double loss = 0.0;   // mean nats per predicted token
  int64_t tokens = 0;  // tokens predicted (N - 1 for N tokens)
};

// N >= 2 tokens; context 0 = block_size. A context past block_size with learned positions
// is the model's error (GPT::forward).
Score score_tokens(GPT& model, const TokenSequence& tokens, int64_t windows_per_batch = 32,
                   int64_t context = 0);

// The tokens per window that a --context asks of the model `c` of run `run` (0: block_size).
// Past block_size only where the positions extrapolate; for learned ones, an error that
// says why and what to do.
int64_t window_context(const ModelConfig& c, int64_t context, const std::string& run);

// Bits per UTF-8 byte of a loss in nats per token, for text of `tokens_per_byte`.
inline double bits_per_byte(double loss, double tokens_per_byte) {
  return loss / 0.6931471805599453 * tokens_per_byte;
}

// Mean cross entropy of logits (B, T, V) against targets (B, T): the fused kernel's
// (model/kernels/cross_entropy.h) where it takes the logits, else LibTorch's.
torch::Tensor next_token_loss(const torch::Tensor& logits, const torch::Tensor& targets);

}  // namespace tinylm
