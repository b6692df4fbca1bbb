#pragma once
// The subcommands of `tinylm`, one file each. Each file holds its Args, its run function and
// the registration below, which binds its flags to a fresh Args on the CLI11 app and
// returns the callback that runs it once the command line is parsed. Shared flags and
// errors: tools/cli.h.

#include <functional>

#include <CLI/CLI.hpp>

namespace tinylm {

using Command = std::function<int()>;  // returns the process's exit status

Command add_train_command(CLI::App& app);
Command add_sample_command(CLI::App& app);
Command add_eval_command(CLI::App& app);
Command add_inspect_command(CLI::App& app);
Command add_prepare_command(CLI::App& app);
Command add_bench_command(CLI::App& app);
Command add_keys_command(CLI::App& app);
Command add_import_command(CLI::App& app);
Command add_export_command(CLI::App& app);
Command add_serve_command(CLI::App& app);
Command add_features_command(CLI::App& app);

}  // namespace tinylm
