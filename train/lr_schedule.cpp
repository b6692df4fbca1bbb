#include "train/lr_schedule.h"

#include <cmath>

namespace tinylm {

double learning_rate_at(int64_t step, const TrainConfig& c) {
  if (!c.decay_lr) return c.learning_rate;
  if (step < c.warmup_iters) {
    return c.learning_rate * static_cast<double>(step + 1) /
           static_cast<double>(c.warmup_iters + 1);
  }
  const int64_t decay_from = c.warmup_iters + c.stable_iters;
  if (step < decay_from) return c.learning_rate;
  if (step > c.lr_decay_iters) return c.min_lr;
  const double ratio = static_cast<double>(step - decay_from) /
                       static_cast<double>(c.lr_decay_iters - decay_from);
  const double coeff = 0.5 * (1.0 + std::cos(M_PI * ratio));  // 1 -> 0
  return c.min_lr + coeff * (c.learning_rate - c.min_lr);
}

}  // namespace tinylm
