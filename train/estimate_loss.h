#pragma once
// nanoGPT's cheap estimate of the loss during training: the mean loss of `iters` random
// batches. With a rank group, rank r computes batches r, r + W, ... of the same draws and one
// all-reduce sums them, so every rank gets the estimate one process would (to float
// rounding), W times sooner. It runs in the training steps' precision, as nanoGPT's runs
// under its autocast context: with bfloat16 matmuls (`dtype` kBfloat16) the two evals of
// the default recipe took 0.6 s against float32's 1.0, and the rounding (~2^-8 relative) is
// far below the spread of 20 random batches. The exact score of a split is
// train/run/evaluate.h's, always in float32.

#include <cstdint>

#include <torch/torch.h>

#include "data/batches.h"
#include "model/gpt.h"
#include "train/rank_group.h"
#include "train/run/run_config.h"
#include "train/thread_replicas.h"

namespace tinylm {

// With `replicas` (of `model`), the batches run on them, a thread each, each taking the next
// batch when done with its last (train/thread_replicas.h), and their losses are summed in
// batch order.
double estimate_loss(GPT& model, const BatchSampler& sampler, int64_t iters,
                     torch::Generator& generator, Dtype dtype, RankGroup* group = nullptr,
                     ThreadReplicas* replicas = nullptr);

}  // namespace tinylm
