// `tinylm eval RUN [--split val|train | --text FILE] [--json]`
// Scores every token of the split (or file) exactly once; see train/evaluate.h.

#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "data/corpus.h"
#include "model/ablation.h"
#include "tools/commands.h"
#include "train/checkpoint.h"
#include "train/evaluate.h"
#include "train/run_corpus.h"

namespace tinylm {

std::function<int()> add_eval_command(CLI::App& app) {
  struct Args {
    std::string run, split = "val", text, ablate;
    bool json = false;
    int threads = 0;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("eval", "Measure loss, perplexity and bits per character");
  cmd->add_option("run", args->run, "Run directory (or its best/)")->required();
  auto* split = cmd->add_option("--split", args->split, "Which split of the run's corpus")
                    ->check(CLI::IsMember({"val", "train"}));
  cmd->add_option("--text", args->text, "Score this UTF-8 file instead of a split")->excludes(split);
  cmd->add_flag("--json", args->json, "Print one JSON object");
  cmd->add_option("--ablate", args->ablate, "Zero these heads' outputs, e.g. 0.3,1.0 (LAYER.HEAD)");
  cmd->add_option("--threads", args->threads, "Intra-op threads (default: all cores)");

  return [args]() {
    set_threads(args->threads);
    const std::vector<HeadRef> ablated = parse_ablate_flag(args->ablate);
    LoadedRun run = load_run(args->run);
    const std::vector<HookHandle> ablation = ablate_from_flag(run.model, ablated);
    std::string source;
    torch::Tensor tokens;
    if (!args->text.empty()) {
      source = args->text;
      std::vector<int64_t> ids = run.tokenizer.encode(read_corpus(args->text), args->text);
      tokens = torch::from_blob(ids.data(), {static_cast<int64_t>(ids.size())}, torch::kInt64).clone();
    } else {
      source = args->split + " split of " + describe_corpus(run.config);
      try {
        tokens = run_split(run.config, run.tokenizer, args->split);
      } catch (const std::runtime_error& e) {
        throw std::runtime_error(std::string(e.what()) + " (the run's config.toml in " + args->run +
                                 "); pass --text FILE to score another file");
      }
    }
    if (tokens.numel() < 2) {
      throw std::runtime_error(source + " has " + std::to_string(tokens.numel()) +
                               " tokens; scoring needs at least 2");
    }
    const Score score = score_tokens(run.model, tokens);
    // One token is one character for the char tokenizer.
    const double bits_per_char = score.loss / std::log(2.0);
    const double perplexity = std::exp(score.loss);
    if (args->json) {
      const nlohmann::json out = {{"loss", score.loss},
                                  {"perplexity", perplexity},
                                  {"bits_per_char", bits_per_char},
                                  {"tokens", score.tokens}};
      std::printf("%s\n", out.dump().c_str());
    } else {
      std::printf("run           %s\n", args->run.c_str());
      std::printf("scored        %s\n", source.c_str());
      std::printf("tokens        %lld\n", static_cast<long long>(score.tokens));
      std::printf("loss          %.4f nats/token\n", score.loss);
      std::printf("perplexity    %.4f\n", perplexity);
      std::printf("bits/char     %.4f\n", bits_per_char);
    }
    return 0;
  };
}

}  // namespace tinylm
