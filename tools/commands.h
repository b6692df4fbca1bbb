#pragma once
// The subcommands of `tinylm`, one file each. Each registers itself on the CLI11 app and
// returns the process exit status from its run function. Errors are exceptions: UsageError
// (exit 2) for a bad command line, anything else (exit 1) for bad input or a failed run.

#include <stdexcept>

#include <CLI/CLI.hpp>

namespace tinylm {

struct UsageError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// Each returns the callback that runs the subcommand once the command line is parsed.
std::function<int()> add_train_command(CLI::App& app);
std::function<int()> add_sample_command(CLI::App& app);
std::function<int()> add_eval_command(CLI::App& app);

// Sets LibTorch's intra-op threads: all cores unless the user chose (LibTorch defaults to 1 here).
void set_threads(int threads);

}  // namespace tinylm
