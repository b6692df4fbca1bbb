#pragma once
// Snapshots of the heads during training (model/analysis/head_snapshot.h), one file per step
// in RUN/snapshots/step_NNNNNNNN.safetensors, written atomically by rank 0 (docs/FORMATS.md).
// Taken at log-spaced steps, 0, 1, 2, 5, 10, 20, 50, 100, ... (1, 2, 5 times a power of
// ten), and at every eval; a resumed run skips the steps already on disk.

#include <cstdint>
#include <filesystem>
#include <vector>

#include <torch/torch.h>

#include "model/analysis/head_snapshot.h"

namespace tinylm {

// Whether `step` is a snapshot step of a run that evaluates every `eval_interval` steps and
// at its last step `max_iters`.
bool is_snapshot_step(int64_t step, int64_t eval_interval, int64_t max_iters);

std::filesystem::path snapshot_path(const std::filesystem::path& run_dir, int64_t step);

// Patterns as float16 (they are in [0, 1]: 3 decimals and more), scores as float32.
void save_snapshot(const std::filesystem::path& run_dir, int64_t step, const HeadSnapshot& s,
                   const torch::Tensor& text, const torch::Tensor& probe);

struct StoredSnapshot {
  int64_t step = 0;
  HeadSnapshot heads;         // patterns back in float32
  torch::Tensor text, probe;  // the probes' tokens
};

// Every snapshot of a run, by step; none when it has no snapshots/ directory. Throws
// std::runtime_error naming a file that is not a snapshot.
std::vector<StoredSnapshot> load_snapshots(const std::filesystem::path& run_dir);

// For each head, the first step whose score crossed half the last snapshot's (scores (S, L,
// nh) at `steps`): when the head "formed". NaN where the last score is not above 0, or where
// the first is already at half of it (the score never crossed: nothing formed).
torch::Tensor formation_steps(const std::vector<int64_t>& steps, const torch::Tensor& scores);

}  // namespace tinylm
