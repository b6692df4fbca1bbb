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

// windows (N, T + 1) int64, on any device: inputs [:, :T], targets [:, 1:]. Runs `batch`
// windows per forward pass, without gradients and in eval mode (restored after); sums in
// float32 within a batch and in double across batches. Hooks attached to the model apply.
WindowLoss window_loss(GPT& model, const torch::Tensor& windows, int64_t batch = 32,
                       PredictionSpan span = {});

}  // namespace tinylm
