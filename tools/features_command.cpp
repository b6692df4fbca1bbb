// `tinylm features RUN --hook NAME [--width N] [--k K] [--tokens M] [--lr LR] [--batch B]
//                      [--dead-tokens D] [--eval-windows W] [--seed S] [--out DIR] [--resume]
//                      [--threads N]`
// Trains a TopK sparse autoencoder on one hook point's activations, streamed from the run's
// training tokens, and measures it on the val split: explained variance, L0, dead features
// and CE loss recovered. Writes it in SAELens's layout (train/run/sae_files.h) to
// RUN/saes/HOOK-wN-kK/ unless --out says where. Ctrl-C saves and stops; --resume continues.

#include <ATen/CPUGeneratorImpl.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>

#include <spdlog/spdlog.h>

#include "data/io/made_directory.h"
#include "model/sae/sae_evaluation.h"
#include "train/run/progress.h"
#include "train/run/run_corpus.h"
#include "train/run/sae_files.h"
#include "train/sae_training.h"
#include "tools/cli.h"
#include "tools/commands.h"
#include "tools/inspect/inspection.h"

namespace tinylm {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::atomic<bool> g_features_stop{false};

extern "C" void on_features_stop(int signal) {
  g_features_stop.store(true);
  std::signal(signal, SIG_DFL);  // a second one ends the process at once
}

struct FeaturesArgs {
  std::string run, hook, out;
  int64_t width = 0;  // 0: 8 x the hook's width, or a resumed SAE's own
  int64_t k = 0;      // 0: 16, or a resumed SAE's own
  SaeTrainingOptions training;  // its tokens unused: see `tokens`
  int64_t tokens = 0;  // 0: 2^20, or a resumed SAE's own total
  int64_t eval_windows = 256;
  bool resume = false;
  int threads = 0;
};

json metrics_json(const SaeEvaluation& e, const SaeProgress& p, const SaeTrainingOptions& o,
                  const SparseAutoencoder& sae, const std::string& hook, const std::string& source) {
  const auto number = [](double x) { return std::isfinite(x) ? json(x) : json(nullptr); };
  return {{"hook_name", hook},
          {"d_in", sae.shape.d_in},
          {"d_sae", sae.shape.width},
          {"k", sae.shape.k},
          {"tokens_trained", p.tokens_done},
          {"steps", p.steps},
          {"seconds", p.seconds},
          {"explained_variance", number(e.explained_variance)},
          {"l0", number(e.l0)},
          {"dead_fraction", dead_fraction(p, o.dead_tokens)},
          {"dead_window_tokens", o.dead_tokens},
          {"ce_loss_clean", e.clean_loss},
          {"ce_loss_spliced", e.spliced_loss},
          {"ce_loss_zero_ablated", e.zero_loss},
          {"ce_loss_recovered", number(e.ce_recovered)},
          {"eval_tokens", e.tokens},
          {"eval_source", source},
          {"training", o.to_json()}};
}

int run_features(FeaturesArgs& args) {
  set_threads(args.threads);
  LoadedRun run = load_run(args.run);
  run.model->eval();
  const HookRows hook(run.model, args.hook);  // an unknown name is an error naming the closest
  SaeShape shape{hook.width(), args.width > 0 ? args.width : 8 * hook.width(),
                 args.k > 0 ? args.k : 16};
  if (shape.k > shape.width) {
    throw UsageError("--k " + std::to_string(shape.k) + " is more than the SAE's width " +
                     std::to_string(shape.width) + " (--width): k must be in [1, width]");
  }
  RunData data;
  try {
    RunDataOptions options;
    options.tokenizer = run.tokenizer;
    data = load_run_data(run.config, options);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(std::string(e.what()) + " (the corpus of " + args.run +
                             ", whose activations the SAE reads)");
  }
  const int64_t T = run.model->config().block_size;
  const std::string source = "the val split of " + describe_corpus(run.config);
  const torch::Tensor eval_windows =
      consecutive_windows(data.val.tokens.slice(0, std::min<int64_t>(data.val.tokens.size(),
                                                                     args.eval_windows * (T + 1)))
                              .to_tensor(),
                          T + 1, args.eval_windows * (T + 1), source, "measuring the SAE");

  const fs::path dir = args.out.empty() ? sae_directory(args.run, args.hook, shape) : fs::path(args.out);
  const bool saved = has_sae_progress(dir);
  if (saved && !args.resume) {
    throw UsageError(dir.string() + " holds an SAE already: --resume continues it (with --tokens "
                     "for more), --out DIR writes another");
  }
  if (!saved && args.resume) {
    throw UsageError("--resume: " + dir.string() + " holds no SAE's training state to continue");
  }
  torch::Generator init = at::make_generator<at::CPUGeneratorImpl>(args.training.seed);
  SparseAutoencoder sae(shape, init);
  SaeProgress progress;
  SaeTrainingOptions options = args.training;
  if (args.tokens > 0) options.tokens = args.tokens;
  if (saved) {
    ResumedSae resumed = load_sae_progress(dir);
    // --out DIR --resume needs no --width or --k: the SAE's own, unless the flags say others.
    if (args.width == 0) shape.width = resumed.sae.shape.width;
    if (args.k == 0) shape.k = resumed.sae.shape.k;
    if (resumed.sae.shape.d_in != shape.d_in || resumed.sae.shape.width != shape.width ||
        resumed.sae.shape.k != shape.k) {
      throw UsageError(dir.string() + " holds an SAE of width " +
                       std::to_string(resumed.sae.shape.width) + ", k " +
                       std::to_string(resumed.sae.shape.k) + " on " +
                       std::to_string(resumed.sae.shape.d_in) + " numbers; the flags ask for " +
                       std::to_string(shape.width) + ", " + std::to_string(shape.k) + ", " +
                       std::to_string(shape.d_in));
    }
    sae = std::move(resumed.sae);
    progress = std::move(resumed.progress);
    options = SaeTrainingOptions::from_json(
        progress.options, args.tokens > 0 ? args.tokens : progress.tokens_total);
    spdlog::info("resuming {}: {} of {} tokens done", dir.string(), progress.tokens_done,
                 progress.tokens_total);
  }
  progress.tokens_total = options.tokens;
  MadeDirectory made(dir, "--out");
  SaeOrigin origin{args.hook, hook.layer(), fs::path(args.run).lexically_normal().string(),
                   describe_corpus(run.config), T, hook.per_head()};

  ProgressLine line(true);
  // A log line after the first step and every 15 s: progress where stderr is no terminal.
  auto last_log = std::chrono::steady_clock::now();
  SaeTrainingHooks hooks;
  hooks.stop_requested = &g_features_stop;
  hooks.checkpoint = [&](const SparseAutoencoder& s, const SaeProgress& p) {
    save_sae_progress(dir, s, p);
    save_sae(dir, s, origin, {{"tokens_trained", p.tokens_done}, {"finished", false}});
    made.keep();
  };
  hooks.step = [&](const SaeProgress& p, double loss, double tokens_per_s) {
    const auto now = std::chrono::steady_clock::now();
    if (p.steps == 1 || now - last_log >= std::chrono::seconds(15)) {
      line.clear();
      spdlog::info("SAE step {}: {} of {} tokens, loss {:.4f}, {:.0f} tokens/s", p.steps,
                   p.tokens_done, p.tokens_total, loss, tokens_per_s);
      last_log = now;
    }
    line.update(p.tokens_done, p.tokens_total, loss, tokens_per_s,
                static_cast<double>(p.tokens_total - p.tokens_done) / std::max(tokens_per_s, 1.0));
  };
  std::signal(SIGINT, on_features_stop);
  std::signal(SIGTERM, on_features_stop);
  spdlog::info("training an SAE on {} ({} numbers): width {}, k {}, {} tokens -> {} (Ctrl-C saves "
               "and stops)",
               args.hook, shape.d_in, shape.width, shape.k, options.tokens, dir.string());
  const bool finished = train_sae(run.model, hook, data.train.tokens, T, sae, progress, options, hooks);
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  line.clear();
  if (!finished) {
    spdlog::warn("stopped at {} of {} tokens, saved in {}; add --resume to continue",
                 progress.tokens_done, progress.tokens_total, dir.string());
    return 130;
  }
  spdlog::info("trained on {} tokens in {:.1f} s ({:.0f} tokens/s); measuring on {} tokens of {}",
               progress.tokens_done, progress.seconds,
               static_cast<double>(progress.tokens_done) / std::max(progress.seconds, 1e-9),
               eval_windows.size(0) * T, source);
  const SaeEvaluation e = evaluate_sae(run.model, hook, sae, eval_windows);
  const json metrics = metrics_json(e, progress, options, sae, args.hook, source);
  save_sae(dir, sae, origin, metrics);
  made.keep();
  std::printf("explained variance %.4f\nL0                 %.2f\ndead features      %.4f (none fired in the last %lld tokens)\n"
              "CE loss            clean %.4f, spliced %.4f, zero-ablated %.4f\nCE loss recovered  %.4f\n",
              e.explained_variance, e.l0, metrics["dead_fraction"].get<double>(),
              static_cast<long long>(options.dead_tokens), e.clean_loss, e.spliced_loss,
              e.zero_loss, e.ce_recovered);
  spdlog::info("wrote {} (cfg.json, sae_weights.safetensors, metrics.json): `tinylm inspect {} "
               "--features {}` shows its features",
               dir.string(), args.run, dir.string());
  return 0;
}

}  // namespace

Command add_features_command(CLI::App& app) {
  auto args = std::make_shared<FeaturesArgs>();
  CLI::App* cmd = app.add_subcommand(
      "features", "Train a sparse autoencoder (TopK) on a hook point's activations");
  cmd->add_option("run", args->run, "Run directory (or its best/)")->required();
  cmd->add_option("--hook", args->hook,
                  "Hook point, TransformerLens's name: blocks.L.attn.hook_z, "
                  "blocks.L.hook_resid_post, blocks.L.hook_mlp_out, ...")
      ->required();
  cmd->add_option("--width", args->width, "Features (default: 8 x the hook's width)")
      ->check(integer_flag(at_least(1)));
  cmd->add_option("--k", args->k, "Features active per token (TopK's k; default 16)")
      ->check(integer_flag(at_least(1)));
  cmd->add_option("--tokens", args->tokens,
                  "Activations to train on (default 2^20; resumed: the SAE's own total)")
      ->check(integer_flag(at_least(1)));
  cmd->add_option("--lr", args->training.lr, "Adam's learning rate (default 2e-3)")
      ->check(number_flag(above(0)));
  cmd->add_option("--batch", args->training.batch, "Activations per step (default 4096)")
      ->check(integer_flag(at_least(1)));
  cmd->add_option("--dead-tokens", args->training.dead_tokens,
                  "A feature that fired in none of the last N tokens is dead (default 2^19)")
      ->check(integer_flag(at_least(1)));
  cmd->add_option("--eval-windows", args->eval_windows,
                  "Windows of the val split to measure it on (default 256)")
      ->check(integer_flag(at_least(1)));
  cmd->add_option("--seed", args->training.seed, "Seed of the initialisation and the sampling");
  cmd->add_option("--out", args->out, "Directory to write (default RUN/saes/HOOK-wN-kK)");
  cmd->add_flag("--resume", args->resume, "Continue the SAE in the directory");
  add_threads_flag(cmd, args->threads);
  return [args] { return run_features(*args); };
}

}  // namespace tinylm
