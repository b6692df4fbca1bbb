#include "tools/eval_request.h"

#include <cmath>

#include "data/corpus.h"
#include "data/token_cache.h"
#include "tools/cli.h"
#include "train/run/evaluate.h"
#include "train/run/run_corpus.h"

namespace tinylm {
namespace {

// The tokens to score and where they came from, with the run's own tokenizer.
std::pair<TokenSplit, std::string> tokens_to_score(const LoadedRun& run,
                                                   const std::filesystem::path& run_dir,
                                                   const EvalArgs& args) {
  if (!args.text.empty()) {
    return {encode_corpus_in_memory(*run.tokenizer, args.text, "--text"), args.text};
  }
  RunDataOptions options;
  options.tokenizer = run.tokenizer;
  try {
    const RunData data = load_run_data(run.config, options);
    return {args.split == "train" ? data.train : data.val,
            args.split + " split of " + describe_corpus(run.config)};
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(std::string(e.what()) + " (the run's config.toml in " +
                             run_dir.string() + "); pass --text FILE to score another file");
  }
}

}  // namespace

void add_eval_options(CLI::App* cmd, EvalArgs& args) {
  auto* split = cmd->add_option("--split", args.split, "Which split of the run's corpus")
                    ->check(CLI::IsMember({"val", "train"}));
  cmd->add_option("--text", args.text, "Score this UTF-8 file instead of a split")->excludes(split);
  cmd->add_option("--context", args.context,
                  "Tokens per window (default block_size); past block_size measures length "
                  "extrapolation, for every pos_encoding but learned")
      ->check(integer_flag(at_least(1)));
}

EvalResult run_eval_request(LoadedRun& run, const std::filesystem::path& run_dir,
                            const EvalArgs& args) {
  auto [tokens, source] = tokens_to_score(run, run_dir, args);
  if (tokens.tokens.size() < 2) {
    throw std::runtime_error(source + " has " + std::to_string(tokens.tokens.size()) +
                             " tokens; scoring needs at least 2");
  }
  const int64_t context = window_context(run.model->config(), args.context, run_dir.string());
  const Score score = score_tokens(run.model, tokens.tokens, 32, context);
  // Bits per byte of UTF-8 text compare across tokenizers; the scored tokens stand for all
  // but the first token's bytes, so the ratio of the whole text is used.
  const double bpb = bits_per_byte(score.loss, tokens.tokens_per_byte());
  const nlohmann::json scores = {{"loss", score.loss},
                                 {"perplexity", std::exp(score.loss)},
                                 {"bits_per_token", score.loss / std::log(2.0)},
                                 {"bits_per_byte", bpb},
                                 {"tokens", score.tokens},
                                 {"context", context},
                                 {"bytes", tokens.text_bytes},
                                 {"tokenizer", run.tokenizer->kind_name()}};
  return {scores, source, tokens.tokens, context};
}

}  // namespace tinylm
