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

// The most float32 logits one forward pass may hold: GPT-2's 1024 x 50257 logits are
// 206 MB a window, so its 32 windows at once would be 6.6 GB (and cross entropy's
// log-softmax as much again).
inline constexpr int64_t kWindowLossLogitsBytes = int64_t{256} << 20;

// windows (N, T + 1) int64, on any device: inputs [:, :T], targets [:, 1:]. Runs up to
// `batch` windows per forward pass, fewer where their logits would pass
// kWindowLossLogitsBytes (at least one), without gradients and in eval mode (restored
// after); sums in float32 within a pass and in double across passes. Hooks attached to the
// model apply.
WindowLoss window_loss(GPT& model, const torch::Tensor& windows, int64_t batch = 32,
                       PredictionSpan span = {});

}  // namespace tinylm
