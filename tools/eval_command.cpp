// `tinylm eval RUN [--split val|train | --text FILE] [--context N] [--json] [--logits FILE]`
// Scores every token of the split (or file) exactly once, in windows of block_size tokens or
// of N (past block_size where the positions extrapolate); see train/run/evaluate.h. --logits
// writes the first window's logits, to check tinylm's numbers against another
// implementation (tests/hf_gpt2_import.py does, against numpy's GPT-2).

#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "data/corpus.h"
#include "data/token_cache.h"
#include "tools/cli.h"
#include "tools/commands.h"
#include "train/run/evaluate.h"
#include "train/run/run_corpus.h"
#include "train/run/safetensors.h"

namespace tinylm {
namespace {

struct EvalArgs {
  RunFlags run;
  std::string split = "val", text;
  int64_t context = 0;  // 0: block_size
  bool json = false;
  std::string logits;  // a safetensors file to write
};

// safetensors {tokens: I64 (T), logits: F32 (T, V)}: the first window of `tokens`.
void write_logits(GPT& model, const TokenSequence& tokens, int64_t context,
                  const std::string& path) {
  const int64_t T = std::min(context, tokens.size());
  torch::Tensor ids = torch::empty({T}, torch::kInt64);
  tokens.copy_to(0, T, ids.data_ptr<int64_t>());
  torch::NoGradGuard no_grad;
  const torch::Tensor logits = model->forward(ids.unsqueeze(0).to(model->device()))
                                   .squeeze(0)
                                   .to(torch::kCPU, torch::kFloat32);
  save_safetensors(path, {{"tokens", ids}, {"logits", logits}},
                   {{"context", std::to_string(context)}});
}

// The tokens to score and where they came from, with the run's own tokenizer.
std::pair<TokenSplit, std::string> tokens_to_score(const LoadedRun& run, const EvalArgs& args) {
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
    throw std::runtime_error(std::string(e.what()) + " (the run's config.toml in " + args.run.run +
                             "); pass --text FILE to score another file");
  }
}

int run_eval(const EvalArgs& args) {
  OutputFile logits(args.logits, "--logits");
  OpenRun open = open_run(args.run);
  const LoadedRun& run = open.run;
  const auto [tokens, source] = tokens_to_score(run, args);
  if (tokens.tokens.size() < 2) {
    throw std::runtime_error(source + " has " + std::to_string(tokens.tokens.size()) +
                             " tokens; scoring needs at least 2");
  }
  const ModelConfig& mc = run.model->config();
  const int64_t context = window_context(mc, args.context, args.run.run);
  const Score score = score_tokens(open.run.model, tokens.tokens, 32, context);
  if (!args.logits.empty()) write_logits(open.run.model, tokens.tokens, context, args.logits);
  logits.keep();
  // Bits per byte of UTF-8 text compare across tokenizers; the scored tokens stand for all
  // but the first token's bytes, so the ratio of the whole text is used.
  const double bpb = bits_per_byte(score.loss, tokens.tokens_per_byte());
  const double perplexity = std::exp(score.loss), bits = score.loss / std::log(2.0);
  if (args.json) {
    const nlohmann::json out = {
        {"loss", score.loss},         {"perplexity", perplexity},
        {"bits_per_token", bits},     {"bits_per_byte", bpb},
        {"tokens", score.tokens},     {"context", context},
        {"bytes", tokens.text_bytes}, {"tokenizer", run.tokenizer->kind_name()}};
    std::printf("%s\n", out.dump().c_str());
    return 0;
  }
  std::printf("run           %s\n", args.run.run.c_str());
  std::printf("scored        %s\n", source.c_str());
  std::printf("tokenizer     %s\n", run.tokenizer->describe().c_str());
  std::printf("tokens        %lld (%llu bytes of text)\n", static_cast<long long>(score.tokens),
              static_cast<unsigned long long>(tokens.text_bytes));
  std::printf("context       %lld tokens per window (block_size %lld)\n",
              static_cast<long long>(context), static_cast<long long>(mc.block_size));
  std::printf("loss          %.4f nats/token\n", score.loss);
  std::printf("perplexity    %.4f\n", perplexity);
  std::printf("bits/token    %.4f\n", bits);
  std::printf("bits/byte     %.4f\n", bpb);
  return 0;
}

}  // namespace

Command add_eval_command(CLI::App& app) {
  auto args = std::make_shared<EvalArgs>();
  CLI::App* cmd = app.add_subcommand("eval", "Measure loss, perplexity and bits per byte");
  add_run_flags(cmd, args->run);
  auto* split = cmd->add_option("--split", args->split, "Which split of the run's corpus")
                    ->check(CLI::IsMember({"val", "train"}));
  cmd->add_option("--text", args->text, "Score this UTF-8 file instead of a split")
      ->excludes(split);
  cmd->add_option("--context", args->context,
                  "Tokens per window (default block_size); past block_size measures length "
                  "extrapolation, for every pos_encoding but learned")
      ->check(integer_flag(at_least(1)));
  cmd->add_flag("--json", args->json, "Print one JSON object");
  cmd->add_option("--logits", args->logits,
                  "Also write the first window's logits here: safetensors with tokens (T) and "
                  "logits (T, vocab)");
  return [args] { return run_eval(*args); };
}

}  // namespace tinylm
