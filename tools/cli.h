#pragma once
// What the subcommands share on the command line: the error that means "bad usage" (exit
// 2), threads, devices, config overrides, and the flags of the commands that read a run
// (RUN, --ablate, --threads, --device). Errors are exceptions: UsageError for a bad command
// line, anything else (exit 1) for bad input or a failed run.

#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <torch/torch.h>
#include <CLI/CLI.hpp>

#include "data/io/made_directory.h"
#include "model/analysis/ablation.h"
#include "train/run/checkpoint.h"
#include "train/run/run_config.h"

namespace tinylm {

struct UsageError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// Sets LibTorch's intra-op threads: all cores for 0 (LibTorch's own default here is 1).
// More than the cores is capped at the cores with a warning (oversubscribed threads only
// spin against each other), unless TINYLM_OVERSUBSCRIBE=1 asks for them anyway. Returns the
// count set.
int set_threads(int threads);
int cores();
// --threads N on `cmd`, checked as a count (0: all cores).
void add_threads_flag(CLI::App* cmd, int& threads,
                      const std::string& help = "Intra-op threads (default: all cores)");

// Numeric flags checked by the rules config keys use (model/config_key.h), so that a flag
// and a key say a range the same way: the text must be a whole number within int64's range
// (integer_flag) or a finite number (number_flag), inside `accepts`; CLI11 reports it as
// "--context: must be a whole number >= 1 (got "0")". NaN, infinity and overflowing integers
// never pass.
CLI::Validator integer_flag(Accepts accepts);
CLI::Validator number_flag(Accepts accepts);

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

// A file a command writes (export --out, inspect --html and --json, eval --logits), checked
// before any work: named, not a directory, and in a directory that exists or that one mkdir
// makes (its parent exists), so that a typo never makes a tree; a probe file shows it can be
// written. That one directory is made now and removed again unless keep() is called once the
// file is written: a failed command leaves nothing. An empty path (the flag not given) and
// "-" (stdout) are nothing to check.
class OutputFile {
 public:
  OutputFile(const std::string& path, const std::string& flag);
  void keep() {
    if (made_) made_->keep();
  }

 private:
  std::optional<MadeDirectory> made_;
};

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

}  // namespace tinylm
