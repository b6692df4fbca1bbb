#pragma once
// The training loop: AdamW (weight decay on 2-D+ parameters only), the lr schedule,
// gradient accumulation and clipping, periodic loss estimates, metrics.jsonl, checkpoints
// (`last` at every eval, best/ when val improves) and exact resumption: a resumed run
// reproduces the losses of an unbroken one step for step (same thread count, world size
// and device). With a rank group the same loop runs on every rank (train/train_step.h says
// how the batch is split); rank 0 alone writes the run directory and the progress line.

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include "train/run_breakdown.h"
#include "train/rank_group.h"
#include "train/run/run_config.h"

namespace tinylm {

struct TrainOptions {
  std::filesystem::path out_dir;
  bool resume = false;
  bool progress = true;  // the live line, when stderr is a terminal
  // Polled after every step; when set, the step is finished, a checkpoint is written and
  // train() returns Interrupted.
  const std::atomic<bool>* stop_requested = nullptr;
  // Called after every optimizer step with the number of steps completed.
  std::function<void(int64_t step)> on_step;
  // Data parallel: this rank's group (null: one process). Every rank must pass the same
  // config; train() checks that, and the build (`build_id`), before the first step.
  RankGroup* group = nullptr;
  std::string build_id;
  // This rank's device when it is not train.device as written (cuda:LOCAL_RANK for "cuda").
  std::optional<torch::Device> device;
};

// Sequences in the induction probe scored at every eval (model/analysis/induction_probe.h).
inline constexpr int64_t kTrainingProbes = 4;

enum class TrainOutcome { kFinished, kInterrupted };

struct TrainResult {
  TrainOutcome outcome = TrainOutcome::kFinished;
  int64_t step = 0;
  double val_loss = 0.0;  // the last val estimate this call made; NaN when it made none
  RunBreakdown time;      // where this process's wall time went, to its end
  double wall_seconds = 0.0;  // since the process started
};

// Throws std::runtime_error unless `out` may be trained into, deciding before anything is
// written there: a new run (`resume` false) needs a new or empty directory, or one that holds
// only what a start killed before its first checkpoint left (locks, the staged
// checkpoint, a metrics log of step 0's records); a resume needs a run, or a checkpoint a kill left
// committed but not moved into place. `writer`: rank 0, which writes the directory.
void check_run_directory(const std::filesystem::path& out, bool resume, bool writer);

// `config` is the run's config; on resume it must be the one in out_dir/config.toml
// (apart from train.max_iters and the [sample] section, which may change).
TrainResult train(const RunConfig& config, const TrainOptions& options);

}  // namespace tinylm
