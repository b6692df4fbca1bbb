#pragma once
// One optimizer step, shared by `tinylm train` and `tinylm bench`: forward and backward of
// every micro-batch (under bfloat16 autocast when train.dtype says so), gradient clipping,
// AdamW at the given learning rate, gradients zeroed for the next step.
//
// Data parallel: the global batch is the same at any world size. Every rank draws all of it
// (gradient_accumulation_steps draws of batch_size sequences, from generators in the same
// state on every rank) and keeps its slice: rank r of W takes sequences [r L, (r + 1) L) of
// the B x G, L = B G / W, in micro-batches of at most B. Each rank's loss is the mean over its
// slice; one all-reduce sums the gradients with the loss and a stop request riding along in
// the buffer's side slots, and dividing by W makes the mean over the global batch, before
// clipping. So W ranks take the step one process would, to float rounding.

#include <functional>
#include <utility>

#include <torch/torch.h>

#include "model/gpt.h"
#include "train/adamw.h"
#include "train/rank_group.h"
#include "train/run/run_config.h"
#include "train/thread_replicas.h"

namespace tinylm {

using BatchSource = std::function<std::pair<torch::Tensor, torch::Tensor>()>;  // (B, T) x, y

struct StepResult {
  double loss = 0.0;       // mean over the global batch
  double grad_norm = 0.0;  // before clipping
  bool stop = false;       // some rank asked to stop (always `stop_requested` without a group)
};

// Throws std::invalid_argument when batch_size x gradient_accumulation_steps is not a
// multiple of the world size.
void check_batch_splits(const TrainConfig& config, int world_size);

// `group` null: one process. `stop_requested`: this rank's wish to stop after this step.
// `replicas` null: each micro-batch through `model`, its operators split over the threads;
// otherwise its rows split over the replicas, a thread each (train/thread_replicas.h).
StepResult train_step(GPT& model, AdamW& optimizer, const TrainConfig& config, double lr,
                      const BatchSource& next_batch, RankGroup* group = nullptr,
                      bool stop_requested = false, ThreadReplicas* replicas = nullptr);

}  // namespace tinylm
