#pragma once
// What the subcommands share on the command line: the error that means "bad usage" (exit
// 2), threads, devices, config overrides, and the flags of the commands that read a run
// (RUN, --ablate, --threads, --device). Errors are exceptions: UsageError for a bad command
// line, anything else (exit 1) for bad input or a failed run.

#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include <torch/torch.h>
#include <CLI/CLI.hpp>

#include "model/analysis/ablation.h"
#include "train/checkpoint.h"
#include "train/run_config.h"

namespace tinylm {

struct UsageError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// Sets LibTorch's intra-op threads: all cores for 0 (LibTorch's own default here is 1).
void set_threads(int threads);
int cores();

// --device / train.device: cpu, cuda or cuda:N. Malformed: a UsageError; CUDA asked of a
// build or machine without it: a runtime error that says which.
torch::Device parse_device(const std::string& text);

// CLI11's leftover arguments (--section.key=value or --section.key value) as overrides.
std::vector<std::string> parse_overrides(const std::vector<std::string>& extras);

// The config at `path` with `overrides` applied (a bad one is a UsageError); with
// `resolve_paths`, relative paths from overrides become absolute.
RunConfig load_config_with_overrides(const std::filesystem::path& path,
                                     const std::vector<std::string>& overrides, bool resolve_paths);

// Lets `cmd` take config overrides, --section.key=value (its help shows `example`); they are
// parsed into `overrides` once the command line is, and then `run` runs.
std::function<int()> with_overrides(CLI::App* cmd, std::vector<std::string>& overrides,
                                    const std::string& example, std::function<int()> run);

// The flags of a command that reads a run: RUN, and --threads, --device, --ablate.
struct RunFlags {
  std::string run;
  std::string ablate;  // L.H[,L.H...], zeroed at hook_z
  int threads = 0;
  std::string device = "cpu";
};
void add_run_flags(CLI::App* cmd, RunFlags& flags, bool with_ablate = true);

// The run of `flags`, loaded, on its device, with its heads ablated while it lives. A
// malformed --ablate is a UsageError; a head the model lacks, a runtime error naming the
// valid ranges.
struct OpenRun {
  LoadedRun run;
  std::vector<HookHandle> ablation;
};
OpenRun open_run(const RunFlags& flags);

// The tokens per window that --context asks of the model `c` of run `run` (0: block_size).
// Past block_size only where the positions extrapolate; for learned ones, an error that
// says why and what to do.
int64_t window_context(const ModelConfig& c, int64_t context, const std::string& run);

}  // namespace tinylm
