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

// Turns CLI11's leftover arguments into "section.key=value" overrides.
std::vector<std::string> parse_overrides(const std::vector<std::string>& extras) {
  std::vector<std::string> overrides;
  for (size_t i = 0; i < extras.size(); ++i) {
    const std::string& arg = extras[i];
    if (arg.rfind("--", 0) != 0 || arg.find('.') == std::string::npos) {
      throw UsageError("unexpected argument " + arg +
                       " (config overrides look like --train.max_iters=100)");
    }
    std::string item = arg.substr(2);
    if (item.find('=') == std::string::npos) {
      if (i + 1 >= extras.size()) throw UsageError("override " + arg + " needs a value");
      item += "=" + extras[++i];
    }
    overrides.push_back(item);
  }
  return overrides;
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
    RunConfig config = load_run_config(args->resume && fs::exists(out / "config.toml")
                                           ? out / "config.toml"
                                           : fs::path(args->config_path));
    try {
      apply_overrides(config, overrides);
      if (args->seed >= 0) config.train.seed = args->seed;
      config.validate();
    } catch (const std::invalid_argument& e) {
      throw UsageError(e.what());
    }
    if (!args->resume && !config.data.path.empty()) {
      // Resolve the corpus path now: sample and eval read it later from another directory.
      std::error_code ec;
      const fs::path absolute = fs::absolute(config.data.path, ec);
      if (!ec) config.data.path = absolute.lexically_normal().string();
    }

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
