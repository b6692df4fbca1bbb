// `tinylm prepare CONFIG.toml [--section.key=value ...] [--force]`
// Tokenizes the config's corpus into its token cache (data.cache_dir), training the tokenizer
// first when it needs one. `train` does the same when the cache is missing or stale; this
// does it ahead of time, and says what the cache holds.

#include <cstdio>
#include <filesystem>

#include <spdlog/spdlog.h>

#include "tools/cli.h"
#include "tools/commands.h"
#include "train/run/run_corpus.h"

namespace tinylm {
namespace fs = std::filesystem;

namespace {

struct PrepareArgs {
  std::string config_path;
  bool force = false;
  int threads = 0;
  std::vector<std::string> overrides;  // --section.key=value
};

int run_prepare(const PrepareArgs& args) {
  const RunConfig config = load_config_with_overrides(args.config_path, args.overrides, true);
  if (config.data.source != DataSource::kFile) {
    throw UsageError("data.source = \"" + std::string(name_of(config.data.source)) +
                     "\" is generated in memory when training; there is nothing to prepare");
  }
  RunDataOptions options;
  options.threads = set_threads(args.threads);
  options.force = args.force;
  const RunData data = load_run_data(config, options);
  std::printf("cache       %s\n", data.cache_dir.c_str());
  std::printf("tokenizer   %s\n", data.tokenizer->describe().c_str());
  for (const auto& [name, split] : {std::pair{"train", &data.train}, {"val", &data.val}}) {
    std::printf("%-5s       %lld tokens, %llu bytes of text (%.3f bytes/token)\n", name,
                static_cast<long long>(split->tokens.size()),
                static_cast<unsigned long long>(split->text_bytes), 1.0 / split->tokens_per_byte());
  }
  return 0;
}

}  // namespace

Command add_prepare_command(CLI::App& app) {
  auto args = std::make_shared<PrepareArgs>();
  CLI::App* cmd = app.add_subcommand("prepare", "Tokenize a config's corpus into its token cache");
  cmd->add_option("config", args->config_path, "The run's config (configs/*.toml)")->required();
  cmd->add_flag("--force", args->force, "Rebuild the cache even when it is current");
  add_threads_flag(cmd, args->threads, "Encoding threads (default: all cores)");
  return with_overrides(cmd, args->overrides, "--data.vocab_size=2048",
                        [args] { return run_prepare(*args); });
}

}  // namespace tinylm
