#pragma once
// How well an SAE stands in for its hook point, measured on windows of text:
//   explained variance  1 - sum |x - x_hat|^2 / sum |x - mean(x)|^2 over the rows;
//   L0                  features active per row, on average;
//   CE loss recovered   (zero - spliced) / (zero - clean): the next-token loss with the
//                       SAE's reconstruction spliced in at the hook, placed between the
//                       clean model's loss (1) and the loss with the hook's tensor zeroed (0).
// Each loss is over every prediction of the windows, through the model's one windowed loss.

#include <cstdint>
#include <functional>

#include <torch/torch.h>

#include "model/gpt.h"
#include "model/sae/hook_rows.h"
#include "model/sae/sparse_autoencoder.h"

namespace tinylm {

struct SaeEvaluation {
  int64_t tokens = 0;  // rows measured
  double explained_variance = 0.0;
  double l0 = 0.0;
  double clean_loss = 0.0, spliced_loss = 0.0, zero_loss = 0.0;  // mean nats per prediction
  double ce_recovered = 0.0;  // NaN when zeroing the hook costs nothing (no scale to place on)
};

// What a splice puts in place of the hook's rows (N, d_in): rows of the same shape.
using RowMap = std::function<torch::Tensor(const torch::Tensor& rows)>;

// The mean next-token loss on `windows` (N, T + 1) with the hook's rows replaced by
// replace(rows).
double spliced_loss(GPT& model, const HookRows& hook, const torch::Tensor& windows,
                    const RowMap& replace);

// Every figure above, on `windows` (N, T + 1) int64.
SaeEvaluation evaluate_sae(GPT& model, const HookRows& hook, const SparseAutoencoder& sae,
                           const torch::Tensor& windows);

}  // namespace tinylm
