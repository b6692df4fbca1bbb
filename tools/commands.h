#pragma once
// The subcommands of `tinylm`, one file each. Each registers itself on the CLI11 app and
// returns the process exit status from its run function. Errors are exceptions: UsageError
// (exit 2) for a bad command line, anything else (exit 1) for bad input or a failed run.

#include <stdexcept>

#include <CLI/CLI.hpp>
#include <torch/torch.h>

#include "model/ablation.h"
#include "train/run_config.h"

namespace tinylm {

struct UsageError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// Each returns the callback that runs the subcommand once the command line is parsed.
std::function<int()> add_train_command(CLI::App& app);
std::function<int()> add_sample_command(CLI::App& app);
std::function<int()> add_eval_command(CLI::App& app);
std::function<int()> add_inspect_command(CLI::App& app);
std::function<int()> add_prepare_command(CLI::App& app);
std::function<int()> add_bench_command(CLI::App& app);

// CLI11's leftover arguments (--section.key=value or --section.key value) as overrides.
std::vector<std::string> parse_overrides(const std::vector<std::string>& extras);

// The config at `path` with `overrides` applied (a bad one is a UsageError); with
// `resolve_paths`, relative paths from overrides become absolute.
RunConfig load_config_with_overrides(const std::filesystem::path& path,
                                     const std::vector<std::string>& overrides, bool resolve_paths);

// --ablate L.H[,L.H...] of eval and sample: parsed (a UsageError when malformed), then
// checked against the model (a runtime error naming the valid ranges) and hooked in.
std::vector<HeadRef> parse_ablate_flag(const std::string& text);
std::vector<HookHandle> ablate_from_flag(GPT& model, const std::vector<HeadRef>& heads);

// --device / train.device: cpu, cuda or cuda:N. Malformed: a UsageError; CUDA asked of a
// build or machine without it: a runtime error that says which.
torch::Device parse_device(const std::string& text);

// Sets LibTorch's intra-op threads: all cores unless the user chose (LibTorch defaults to 1 here).
void set_threads(int threads);

}  // namespace tinylm
