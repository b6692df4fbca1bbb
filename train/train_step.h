#pragma once
// One optimizer step, shared by `tinylm train` and `tinylm bench`: forward and backward of
// every micro-batch (under bfloat16 autocast when train.dtype says so), gradient clipping,
// AdamW at the given learning rate, gradients zeroed for the next step.

#include <functional>
#include <utility>

#include <torch/torch.h>

#include "model/gpt.h"
#include "train/adamw.h"
#include "train/run_config.h"

namespace tinylm {

using BatchSource = std::function<std::pair<torch::Tensor, torch::Tensor>()>;  // (B, T) x, y

struct StepResult {
  double loss = 0.0;       // mean over the micro-batches
  double grad_norm = 0.0;  // before clipping
};

StepResult train_step(GPT& model, AdamW& optimizer, const TrainConfig& config, double lr,
                      const BatchSource& next_batch);

}  // namespace tinylm
