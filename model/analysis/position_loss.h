#pragma once
// Loss by position: the mean next-token loss at each position t of long windows (position t
// predicts token t + 1, having read t + 1 tokens). Past the length a model was trained at,
// the curve shows where it stops coping: it keeps falling while more context helps, and
// rises where the positions stop making sense (learned tables have none past block_size;
// the others extrapolate, some better than others).

#include <cstdint>

#include <torch/torch.h>

#include "model/gpt.h"

namespace tinylm {

struct PositionLoss {
  torch::Tensor per_position;  // (N,) float64: mean nats at positions 0 .. N - 1
  torch::Tensor bucket_start;  // (K,) int64: the first position of each bucket
  torch::Tensor bucket_loss;   // (K,) float64: the mean over the bucket's positions
  int64_t windows = 0;
};

// windows (n, N + 1) int64, scored `batch` at a time without gradients; K = ceil(N / width)
// buckets of width ceil(N / max_buckets) positions.
PositionLoss loss_by_position(GPT& model, const torch::Tensor& windows, int64_t max_buckets = 32,
                              int64_t batch = 16);

}  // namespace tinylm
