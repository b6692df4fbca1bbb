#pragma once
// `tinylm bench --run`: the whole recipe of a config, trained once end to end as `tinylm
// train` trains it, and where its wall time went (train/run_breakdown.h): start-up, data,
// steps, evals, the final eval, probes, snapshots, checkpoints and the rest, with the share of
// the run that is not optimizer steps, the steps' own rate and the last val estimate. One
// run, because start-up is counted from the process's start: repeat the command for a median.

#include <filesystem>

#include "train/run/run_config.h"

namespace tinylm {

// Trains `config` into `dir` (new; removed afterwards); prints a table, or JSON.
void bench_run(const RunConfig& config, const std::filesystem::path& dir, bool json);

}  // namespace tinylm
