#pragma once
// nanoGPT's learning-rate schedule: linear warmup over warmup_iters, cosine decay to min_lr
// at lr_decay_iters, min_lr after. stable_iters holds the peak rate that many steps between
// the warmup and the decay (warmup-stable-decay: learn at full rate, then settle). With
// decay_lr = false the rate is constant.

#include <cstdint>

#include "train/run/run_config.h"

namespace tinylm {

double learning_rate_at(int64_t step, const TrainConfig& config);

}  // namespace tinylm
