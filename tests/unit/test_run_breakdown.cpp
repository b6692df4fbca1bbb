// Where a run's wall time went (train/run_breakdown.h): the parts and the rest, each with
// its share of the wall time.

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

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

TEST(RunBreakdown, TimeSinceTheStartAdvancesWithTheSteadyClock) {
  // Two readings differ by what the steady clock measured between them, not by the kernel's
  // 10 ms ticks: a run's start-up, parts and wall then add up, with "other" never below zero.
  using Clock = std::chrono::steady_clock;
  for (int i = 0; i < 3; ++i) {
    const auto before = Clock::now();
    const double first = RunBreakdown::since_process_start();
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
    const double second = RunBreakdown::since_process_start();
    const double elapsed = std::chrono::duration<double>(Clock::now() - before).count();
    EXPECT_GE(second - first, 0.025);
    EXPECT_LE(second - first, elapsed);
  }
}

}  // namespace
}  // namespace tinylm
