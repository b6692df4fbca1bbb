#pragma once
// The one windowed loss of tinylm: windows of tokens in, summed next-token cross entropy
// out. Eval, ablation and the induction probe all score through it.

#include <cstdint>

#include <torch/torch.h>

#include "model/gpt.h"

namespace tinylm {

struct WindowLoss {
  double nats = 0.0;        // summed over the predictions counted
  int64_t predictions = 0;  // how many
  double mean() const { return nats / static_cast<double>(predictions); }
};

// Which predictions count: those made at positions [from, to) of each window; to = -1 is
// the window's end. Position i predicts token i + 1.
struct PredictionSpan {
  int64_t from = 0;
  int64_t to = -1;
};

// The most float32 logits that exist at once: GPT-2's 1024 x 50257 logits are 206 MB a
// window, so its 32 windows at once would be 6.6 GB (and cross entropy's log-softmax as
// much again). Logits are made and scored a slice of positions at a time.
inline constexpr int64_t kWindowLossLogitsBytes = int64_t{256} << 20;

// The most that one pass's widest activation (the MLP's (B, T, 4C)) may take: bounds the
// windows run through the blocks at once.
inline constexpr int64_t kWindowLossActivationBytes = int64_t{64} << 20;

// Positions whose float32 logits fit kWindowLossLogitsBytes (at least one).
int64_t logit_chunk_positions(int64_t vocab_size);

// Windows of T positions whose widest activation fits kWindowLossActivationBytes (at least
// one, at most `batch`).
int64_t windows_per_pass(const ModelConfig& config, int64_t T, int64_t batch);

// Next-token cross entropy from ln_f's output: normalized (B, T, C), targets (B, T) int64
// -> (B, T) nats in normalized's dtype, with at most logit_chunk_positions of logits at once.
torch::Tensor next_token_losses(const GPT& model, const torch::Tensor& normalized,
                                const torch::Tensor& targets);

// windows (N, T + 1) int64, on any device: inputs [:, :T], targets [:, 1:]. Runs up to
// `batch` windows per forward pass (fewer where windows_per_pass says), without gradients
// and in eval mode (restored after); sums in double. Hooks attached to the model apply.
WindowLoss window_loss(GPT& model, const torch::Tensor& windows, int64_t batch = 32,
                       PredictionSpan span = {});

}  // namespace tinylm
