// `tinylm train CONFIG.toml [--section.key=value ...] [--out DIR] [--resume] [--threads N]
//  [--seed S] [--device D] [--nproc N]`
// With torchrun's environment (RANK, WORLD_SIZE, ...) it joins that job as one rank; with
// --nproc it starts N ranks on this machine itself (tools/rank_launcher.h).

#include <csignal>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <thread>

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include "data/io/fingerprint.h"
#include "data/io/made_directory.h"
#include "tools/cli.h"
#include "tools/commands.h"
#include "tools/rank_launcher.h"
#include "train/rank_group.h"
#include "train/run/run_config.h"
#include "train/trainer.h"

namespace tinylm {
namespace fs = std::filesystem;
namespace {

// Set by SIGINT/SIGTERM; the trainer finishes its step, saves and returns. A second signal
// takes the default action (the process ends at once).
std::atomic<bool> g_stop_requested{false};

extern "C" void on_stop_signal(int signal) {
  g_stop_requested.store(true);
  std::signal(signal, SIG_DFL);
}

// Which build this is: ranks of one job must run the same one.
std::string build_fingerprint() {
  std::ifstream in("/proc/self/exe", std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return std::string("tinylm ") + TINYLM_VERSION + ", binary " +
         to_hex(Fingerprint().add(bytes).value());
}

// The command line for each rank of --nproc: this one without --nproc, with --threads.
std::vector<std::string> rank_command_line(int threads) {
  std::vector<std::string> args;
  bool has_threads = false;
  const std::vector<std::string> own = own_command_line();
  for (size_t i = 0; i < own.size(); ++i) {
    if (own[i] == "--nproc") {
      ++i;
      continue;
    }
    if (own[i].rfind("--nproc=", 0) == 0) continue;
    has_threads = has_threads || own[i] == "--threads" || own[i].rfind("--threads=", 0) == 0;
    args.push_back(own[i]);
  }
  if (!has_threads) args.insert(args.end(), {"--threads", std::to_string(threads)});
  return args;
}

struct TrainArgs {
  std::string config_path, device;
  std::optional<std::string> out;  // unset: runs/<config name>
  bool resume = false;
  int threads = 0;
  int nproc = 0;
  std::optional<int64_t> seed;
  std::vector<std::string> overrides;  // --section.key=value
};

// A resumed run keeps its model and the meaning of its token ids: an override that would
// change either is refused at once, before anything is read or written, naming the key.
void check_resumable(const RunConfig& saved, const RunConfig& resumed) {
  for (const ConfigKey<RunConfig>& k : run_keys()) {
    if (!fixed_by_the_run(k.name) || k.get(saved) == k.get(resumed)) continue;
    const bool model = k.name.rfind("model.", 0) == 0;
    throw UsageError("--" + k.name + "=" + config_value_text(k.get(resumed)) +
                     " would change the " + (model ? "model" : "tokenizer") +
                     " of the run being resumed (its " + k.name + " is " +
                     config_value_text(k.get(saved)) + "); start a new run with --out instead");
  }
}

// --resume continues a run with its own config.toml. The CONFIG named on the command line
// is not read for settings; where it differs from the run's, say so once, with the keys.
void warn_if_config_file_differs(const fs::path& file, const fs::path& out,
                                 const RunConfig& saved) {
  std::error_code ec;
  if (fs::equivalent(file, out / "config.toml", ec)) return;
  RunConfig given;
  try {
    given = load_run_config(file);
  } catch (const std::exception& e) {
    spdlog::warn("--resume continues {} with its own config.toml; {} is not used ({})",
                 out.string(), file.string(), e.what());
    return;
  }
  std::string differences;
  int count = 0;
  for (const ConfigKey<RunConfig>& k : run_keys()) {
    if (k.name == "data.cache_dir" || k.get(given) == k.get(saved)) continue;
    if (++count <= 3) {
      differences += std::string(differences.empty() ? "" : "; ") + k.name + " is " +
                     config_value_text(k.get(given)) + " there, " +
                     config_value_text(k.get(saved)) + " in the run";
    }
  }
  if (count == 0) return;
  spdlog::warn(
      "--resume continues {} with its own config.toml; {} is not used, and differs in {} "
      "key{} ({}{}). Change a key that may change with --section.key=value",
      out.string(), file.string(), count, count == 1 ? "" : "s", differences,
      count > 3 ? "; ..." : "");
}

// A new run takes the given config; a resumed one its own config.toml, so that the model
// and data cannot silently change under it.
RunConfig train_config(const TrainArgs& args, const fs::path& out) {
  const bool own = args.resume && fs::exists(out / "config.toml");
  RunConfig config = load_config_with_overrides(
      own ? out / "config.toml" : fs::path(args.config_path), args.overrides, !args.resume);
  if (own) {
    const RunConfig saved = load_run_config(out / "config.toml");
    check_resumable(saved, config);
    warn_if_config_file_differs(args.config_path, out, saved);
  }
  // The flags go through the keys' own checks too (--seed's range is train.seed's; --device
  // is named as itself, then checked as train.device).
  RunConfig flagged = config;
  if (args.seed) flagged.train.seed = *args.seed;
  if (!args.device.empty()) {
    parse_device(args.device);
    flagged.train.device = args.device;
  }
  try {
    flagged.validate();
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  return flagged;
}

// This process as one rank of torchrun's job: its group, on its device (with torchrun and
// "cuda": cuda:LOCAL_RANK), with cores / local ranks threads unless --threads says.
std::unique_ptr<RankGroup> join_job(const WorldEnv& world, const TrainArgs& args,
                                    const RunConfig& config, torch::Device& device) {
  if (world.rank > 0) {  // the others speak only of trouble, and say who they are
    spdlog::set_level(spdlog::level::warn);
    spdlog::set_pattern(fmt::format("[%H:%M:%S] rank {} %^%l%$ %v", world.rank));
  }
  if (device.is_cuda() && !device.has_index()) {
    device = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(world.local_rank));
  }
  set_threads(args.threads > 0 ? args.threads : std::max(1, cores() / world.local_world_size));
  const auto timeout =
      std::chrono::milliseconds(static_cast<int64_t>(config.train.dist_timeout_s * 1000));
  auto group = std::make_unique<RankGroup>(world, device, timeout);
  spdlog::info("rank 0 of {} joined ({} on {}, store {}:{}{})", world.world_size,
               device.is_cuda() ? "NCCL" : "Gloo", device.str(), world.master_addr,
               world.master_port, world.agent_store ? ", the launcher's" : "");
  return group;
}

int run_train(const TrainArgs& args) {
  std::optional<WorldEnv> world;
  try {
    world = world_from_environment();
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  if (world && args.nproc > 0) {
    throw UsageError(
        "--nproc starts ranks itself; it cannot be used inside a job that "
        "already has RANK and WORLD_SIZE set (torchrun's)");
  }
  const fs::path out =
      args.out ? fs::path(*args.out) : fs::path("runs") / fs::path(args.config_path).stem();
  const bool writer = !world || world->rank == 0;
  // One process (or the --nproc launcher) refuses a bad --out at once; the ranks of a
  // torchrun job refuse it in the trainer's start, where they agree, so none waits.
  if (!world) {
    check_can_be_directory(out, "--out");
    check_run_directory(out, args.resume, /*writer=*/true);
  }
  const RunConfig config = train_config(args, out);
  torch::Device device = parse_device(config.train.device);
  if (args.nproc > 0) {
    const int threads = args.threads > 0 ? args.threads : std::max(1, cores() / args.nproc);
    spdlog::info("training {} -> {} with {} ranks x {} thread{}", args.config_path, out.string(),
                 args.nproc, threads, threads == 1 ? "" : "s");
    return launch_local_ranks(args.nproc, rank_command_line(threads), config.train.dist_timeout_s);
  }
  std::unique_ptr<RankGroup> group;
  if (world) {
    group = join_job(*world, args, config, device);
  } else {
    set_threads(args.threads);
  }
  TrainOptions options;
  options.out_dir = out;
  options.resume = args.resume;
  options.stop_requested = &g_stop_requested;
  options.group = group.get();
  if (group) {
    options.device = device;
    options.build_id = build_fingerprint();
  }
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
  spdlog::info("training {} -> {} on {}, {} thread{} (Ctrl-C saves and stops)", args.config_path,
               out.string(), group ? device.str() : config.train.device, torch::get_num_threads(),
               torch::get_num_threads() == 1 ? "" : "s");
  // A new run directory is removed again if training fails before it holds a checkpoint.
  std::optional<MadeDirectory> made;
  if (writer && !args.resume) made.emplace(out, "--out");
  TrainResult result;
  try {
    result = train(config, options);
  } catch (...) {
    if (made && fs::exists(out / "state.json")) made->keep();
    throw;
  }
  if (made) made->keep();
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  // An interrupted run exits 130 whichever signal stopped it, on every rank alike.
  return result.outcome == TrainOutcome::kInterrupted ? 130 : 0;
}

}  // namespace

Command add_train_command(CLI::App& app) {
  auto args = std::make_shared<TrainArgs>();
  CLI::App* cmd = app.add_subcommand("train", "Train a model from a TOML config");
  cmd->add_option("config", args->config_path, "The run's config (configs/*.toml)")->required();
  cmd->add_option("--out", args->out, "Run directory (default: runs/<config name>)");
  cmd->add_flag("--resume", args->resume, "Continue the run in --out from its last checkpoint");
  add_threads_flag(cmd, args->threads,
                   "Intra-op threads per process (default: all cores, divided among the ranks "
                   "on this machine)");
  cmd->add_option("--seed", args->seed, "Overrides train.seed")->check(integer_flag(at_least(0)));
  cmd->add_option("--device", args->device, "cpu, cuda or cuda:N (overrides train.device)");
  cmd->add_option("--nproc", args->nproc,
                  "Train with N data-parallel processes on this machine (the same model as one)")
      ->check(integer_flag(between(1, 1024)));
  Command command = with_overrides(cmd, args->overrides, "--train.max_iters=500",
                                   [args] { return run_train(*args); });
  cmd->footer(cmd->get_footer() +
              "\nSeveral machines: torchrun --redirects 1 --tee 1 --no_python --nnodes=M "
              "--node_rank=K --nproc_per_node=N --master_addr=HOST tinylm train CONFIG");
  return command;
}

}  // namespace tinylm
