// Where a run's wall time went (train/run_breakdown.h): the parts and the rest, each with
// its share of the wall time.

#include <gtest/gtest.h>

#include "train/run_breakdown.h"

namespace tinylm {
namespace {

TEST(RunBreakdown, SaysEachPartAndTheRestAsShares) {
  RunBreakdown time;
  time.add(RunBreakdown::kStartup, 1.0);
  time.add(RunBreakdown::kSteps, 6.0);
  time.add(RunBreakdown::kSteps, 1.5);
  time.add(RunBreakdown::kData, 0.25);
  time.add(RunBreakdown::kEvals, 0.5);
  time.add(RunBreakdown::kFinalEval, 0.3);
  time.add(RunBreakdown::kCheckpoints, 0.25);
  EXPECT_DOUBLE_EQ(time.seconds(RunBreakdown::kSteps), 7.5);
  // 10 s wall: 1 + 0.25 + 7.5 + 0.5 + 0.3 + 0 + 0 + 0.25 = 9.8 counted, 0.2 other.
  EXPECT_EQ(time.summary(10.0),
            "time: 10.0 s wall: start-up 1.0 s (10.0%), data 0.2 s (2.5%), steps 7.5 s (75.0%), "
            "evals 0.5 s (5.0%), final eval 0.3 s (3.0%), probes 0.0 s (0.0%), snapshots 0.0 s "
            "(0.0%), checkpoints 0.2 s (2.5%), other 0.2 s (2.0%)");
  const auto parts = time.parts(10.0);
  ASSERT_EQ(parts.size(), 9u);
  EXPECT_EQ(parts[4].first, "final eval");
  EXPECT_DOUBLE_EQ(parts[4].second, 0.3);
  EXPECT_EQ(parts.back().first, "other");
  EXPECT_NEAR(parts.back().second, 0.2, 1e-12);
  EXPECT_GT(RunBreakdown::since_process_start(), 0.0);
}

}  // namespace
}  // namespace tinylm
