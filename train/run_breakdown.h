#pragma once
// Where a training run's wall time went (issue 33): start-up (the process's start to the
// first step: loading LibTorch, the data and the model), data (drawing batches), steps (the
// optimizer steps without their batches), evals, the final eval, probes, snapshots,
// checkpoints, and the rest (logging, waiting). `train` logs it at the end and writes it to
// metrics.jsonl; bench --run prints it. The parts sum to the wall time.

#include <array>
#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace tinylm {

class RunBreakdown {
 public:
  enum Part {
    kStartup,
    kData,
    kSteps,
    kEvals,
    kFinalEval,
    kProbes,
    kSnapshots,
    kCheckpoints,
    kParts
  };

  void add(Part part, double seconds) { seconds_[part] += seconds; }
  double seconds(Part part) const { return seconds_[part]; }
  // Each part's name and seconds, in the order above, then "other": the wall time the
  // parts leave.
  std::vector<std::pair<std::string, double>> parts(double wall) const;
  // "time: 21.3 s wall: start-up 1.1 s (5.2%), data 0.2 s (0.9%), steps ..., other 0.1 s
  // (0.5%)"; `wall` the whole run's, from the process's start.
  std::string summary(double wall) const;

  // Seconds since the process started, by the kernel's clock (10 ms ticks), else since the
  // first static initialisation in this binary.
  static double since_process_start();

 private:
  std::array<double, kParts> seconds_{};
};

}  // namespace tinylm
