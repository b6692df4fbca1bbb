// The learning-rate schedule: linear warmup, then cosine to min_lr.

#include <gtest/gtest.h>

#include "train/lr_schedule.h"

namespace tinylm {
namespace {

TEST(LrSchedule, WarmupThenCosineToMinLr) {
  TrainConfig t;  // lr 1e-3, warmup 100, decay to 1e-4 at 2000
  EXPECT_DOUBLE_EQ(learning_rate_at(0, t), 1e-3 * 1 / 101);
  EXPECT_DOUBLE_EQ(learning_rate_at(99, t), 1e-3 * 100 / 101);
  EXPECT_DOUBLE_EQ(learning_rate_at(100, t), 1e-3);
  EXPECT_NEAR(learning_rate_at(1050, t), 1e-4 + 0.5 * (1e-3 - 1e-4), 1e-12);  // halfway: cos = 0
  EXPECT_NEAR(learning_rate_at(2000, t), 1e-4, 1e-12);
  EXPECT_DOUBLE_EQ(learning_rate_at(5000, t), 1e-4);
  t.decay_lr = false;
  EXPECT_DOUBLE_EQ(learning_rate_at(0, t), 1e-3);
}

TEST(LrSchedule, StableStepsHoldThePeakBeforeTheCosine) {
  TrainConfig t;  // lr 1e-3, warmup 100, then 900 stable, decay to 1e-4 at 2000
  t.stable_iters = 900;
  EXPECT_DOUBLE_EQ(learning_rate_at(99, t), 1e-3 * 100 / 101);
  EXPECT_DOUBLE_EQ(learning_rate_at(100, t), 1e-3);
  EXPECT_DOUBLE_EQ(learning_rate_at(999, t), 1e-3);
  EXPECT_DOUBLE_EQ(learning_rate_at(1000, t), 1e-3);  // the cosine's start: cos 0 = 1
  EXPECT_NEAR(learning_rate_at(1500, t), 1e-4 + 0.5 * (1e-3 - 1e-4), 1e-12);  // its halfway
  EXPECT_NEAR(learning_rate_at(2000, t), 1e-4, 1e-12);
  EXPECT_DOUBLE_EQ(learning_rate_at(2001, t), 1e-4);
}

}  // namespace
}  // namespace tinylm
