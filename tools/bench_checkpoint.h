#pragma once
// `tinylm bench --checkpoint`: what saving and loading a checkpoint costs for a config, and
// how much of it is fsync and checksums (medians of repeats). Loads read from the page cache,
// as a resume soon after a save does.

#include <filesystem>

#include "data/tokenizer.h"
#include "train/run/run_config.h"

namespace tinylm {

// Writes and reads checkpoints in `dir` (created, and removed afterwards); prints a table,
// or JSON.
void bench_checkpoint(const RunConfig& config, const Tokenizer& tokenizer, int repeats,
                      const std::filesystem::path& dir, bool json);

}  // namespace tinylm
