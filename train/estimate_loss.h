#pragma once
// nanoGPT's cheap estimate of the loss during training: the mean loss of `iters` random
// batches. With a rank group, rank r computes batches r, r + W, ... of the same draws and one
// all-reduce sums them, so every rank gets the estimate one process would (to float
// rounding), W times sooner. The exact score of a split is train/run/evaluate.h's.

#include <cstdint>

#include <torch/torch.h>

#include "data/batches.h"
#include "model/gpt.h"
#include "train/rank_group.h"

namespace tinylm {

double estimate_loss(GPT& model, const BatchSampler& sampler, int64_t iters,
                     torch::Generator& generator, RankGroup* group = nullptr);

}  // namespace tinylm
