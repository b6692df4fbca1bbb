// `tinylm train CONFIG.toml [--section.key=value ...] [--out DIR] [--resume] [--threads N] [--seed S]`

#include <csignal>
#include <filesystem>

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include "tools/commands.h"
#include "train/run_config.h"
#include "train/trainer.h"

namespace tinylm {
namespace fs = std::filesystem;
namespace {

// Set by SIGINT/SIGTERM; the trainer finishes its step, saves and returns. A second signal
// takes the default action (the process ends at once).
std::atomic<bool> g_stop_requested{false};
std::atomic<int> g_signal{0};

extern "C" void on_stop_signal(int signal) {
  g_stop_requested.store(true);
  g_signal.store(signal);
  std::signal(signal, SIG_DFL);
}

}  // namespace

std::function<int()> add_train_command(CLI::App& app) {
  struct Args {
    std::string config_path, out;
    bool resume = false;
    int threads = 0;
    int64_t seed = -1;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("train", "Train a model from a TOML config");
  cmd->add_option("config", args->config_path, "The run's config (configs/*.toml)")->required();
  cmd->add_option("--out", args->out, "Run directory (default: runs/<config name>)");
  cmd->add_flag("--resume", args->resume, "Continue the run in --out from its last checkpoint");
  cmd->add_option("--threads", args->threads, "Intra-op threads (default: all cores)");
  cmd->add_option("--seed", args->seed, "Overrides train.seed");
  cmd->allow_extras();
  cmd->footer("Any config key can be overridden with --section.key=value, e.g. --train.max_iters=500.");

  return [args, cmd]() {
    const std::vector<std::string> overrides = parse_overrides(cmd->remaining());
    set_threads(args->threads);
    const fs::path out =
        args->out.empty() ? fs::path("runs") / fs::path(args->config_path).stem() : fs::path(args->out);

    // A new run takes the given config; a resumed one its own config.toml, so that the
    // model and data cannot silently change under it.
    RunConfig config = load_config_with_overrides(
        args->resume && fs::exists(out / "config.toml") ? out / "config.toml" : fs::path(args->config_path),
        overrides, !args->resume);
    if (args->seed >= 0) config.train.seed = args->seed;

    TrainOptions options;
    options.out_dir = out;
    options.resume = args->resume;
    options.stop_requested = &g_stop_requested;
    std::signal(SIGINT, on_stop_signal);
    std::signal(SIGTERM, on_stop_signal);
    spdlog::info("training {} -> {} on {} threads (Ctrl-C saves and stops)", args->config_path,
                 out.string(), torch::get_num_threads());
    const TrainResult result = train(config, options);
    std::signal(SIGINT, SIG_DFL);
    std::signal(SIGTERM, SIG_DFL);
    if (result.outcome == TrainOutcome::kInterrupted) return 128 + g_signal.load();
    return 0;
  };
}

}  // namespace tinylm
