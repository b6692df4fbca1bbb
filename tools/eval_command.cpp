// `tinylm eval RUN [--split val|train | --text FILE] [--json]`
// Scores every token of the split (or file) exactly once; see train/evaluate.h.

#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "data/corpus.h"
#include "data/token_cache.h"
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
    std::string device = "cpu";
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("eval", "Measure loss, perplexity and bits per byte");
  cmd->add_option("run", args->run, "Run directory (or its best/)")->required();
  auto* split = cmd->add_option("--split", args->split, "Which split of the run's corpus")
                    ->check(CLI::IsMember({"val", "train"}));
  cmd->add_option("--text", args->text, "Score this UTF-8 file instead of a split")->excludes(split);
  cmd->add_flag("--json", args->json, "Print one JSON object");
  cmd->add_option("--ablate", args->ablate, "Zero these heads' outputs, e.g. 0.3,1.0 (LAYER.HEAD)");
  cmd->add_option("--threads", args->threads, "Intra-op threads (default: all cores)");
  cmd->add_option("--device", args->device, "cpu, cuda or cuda:N");

  return [args]() {
    set_threads(args->threads);
    const std::vector<HeadRef> ablated = parse_ablate_flag(args->ablate);
    const torch::Device device = parse_device(args->device);
    LoadedRun run = load_run(args->run);
    run.model->to(device);
    const std::vector<HookHandle> ablation = ablate_from_flag(run.model, ablated);
    std::string source;
    TokenSplit tokens;
    if (!args->text.empty()) {
      source = args->text;
      tokens = encode_in_memory(*run.tokenizer, read_corpus(args->text), args->text);
    } else {
      source = args->split + " split of " + describe_corpus(run.config);
      RunDataOptions options;
      options.tokenizer = run.tokenizer;
      try {
        const RunData data = load_run_data(run.config, options);
        tokens = args->split == "train" ? data.train : data.val;
      } catch (const std::runtime_error& e) {
        throw std::runtime_error(std::string(e.what()) + " (the run's config.toml in " + args->run +
                                 "); pass --text FILE to score another file");
      }
    }
    if (tokens.tokens.size() < 2) {
      throw std::runtime_error(source + " has " + std::to_string(tokens.tokens.size()) +
                               " tokens; scoring needs at least 2");
    }
    const Score score = score_tokens(run.model, tokens.tokens);
    // Bits per byte of UTF-8 text compare across tokenizers; the scored tokens stand for all
    // but the first token's bytes, so the ratio of the whole text is used.
    const double bpb = bits_per_byte(score.loss, tokens.tokens_per_byte());
    const double perplexity = std::exp(score.loss);
    if (args->json) {
      const nlohmann::json out = {{"loss", score.loss},
                                  {"perplexity", perplexity},
                                  {"bits_per_token", score.loss / std::log(2.0)},
                                  {"bits_per_byte", bpb},
                                  {"tokens", score.tokens},
                                  {"bytes", tokens.text_bytes},
                                  {"tokenizer", run.tokenizer->kind()}};
      std::printf("%s\n", out.dump().c_str());
    } else {
      std::printf("run           %s\n", args->run.c_str());
      std::printf("scored        %s\n", source.c_str());
      std::printf("tokenizer     %s\n", run.tokenizer->describe().c_str());
      std::printf("tokens        %lld (%llu bytes of text)\n", static_cast<long long>(score.tokens),
                  static_cast<unsigned long long>(tokens.text_bytes));
      std::printf("loss          %.4f nats/token\n", score.loss);
      std::printf("perplexity    %.4f\n", perplexity);
      std::printf("bits/token    %.4f\n", score.loss / std::log(2.0));
      std::printf("bits/byte     %.4f\n", bpb);
    }
    return 0;
  };
}

}  // namespace tinylm
