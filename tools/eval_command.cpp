// `tinylm eval RUN [--split val|train | --text FILE] [--context N] [--json] [--logits FILE]`
// Scores every token of the split (or file) exactly once, in windows of block_size tokens or
// of N (past block_size where the positions extrapolate); see train/run/evaluate.h. --logits
// writes the first window's logits, to check tinylm's numbers against another
// implementation (tests/hf_gpt2_import.py does, against numpy's GPT-2).

#include <cstdio>

#include <nlohmann/json.hpp>

#include "tools/cli.h"
#include "tools/commands.h"
#include "tools/eval_request.h"
#include "train/run/safetensors.h"

namespace tinylm {
namespace {

struct EvalCommandArgs {
  RunFlags run;
  EvalArgs eval;
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

int run_eval(const EvalCommandArgs& args) {
  OutputFile logits(args.logits, "--logits");
  OpenRun open = open_run(args.run);
  LoadedRun& run = open.run;
  const EvalResult result = run_eval_request(run, args.run.run, args.eval);
  if (!args.logits.empty()) write_logits(run.model, result.tokens, result.context, args.logits);
  logits.keep();
  const nlohmann::json& score = result.scores;
  if (args.json) {
    std::printf("%s\n", score.dump().c_str());
    return 0;
  }
  std::printf("run           %s\n", args.run.run.c_str());
  std::printf("scored        %s\n", result.source.c_str());
  std::printf("tokenizer     %s\n", run.tokenizer->describe().c_str());
  std::printf("tokens        %lld (%llu bytes of text)\n", score["tokens"].get<long long>(),
              score["bytes"].get<unsigned long long>());
  std::printf("context       %lld tokens per window (block_size %lld)\n",
              static_cast<long long>(result.context),
              static_cast<long long>(run.model->config().block_size));
  std::printf("loss          %.4f nats/token\n", score["loss"].get<double>());
  std::printf("perplexity    %.4f\n", score["perplexity"].get<double>());
  std::printf("bits/token    %.4f\n", score["bits_per_token"].get<double>());
  std::printf("bits/byte     %.4f\n", score["bits_per_byte"].get<double>());
  return 0;
}

}  // namespace

Command add_eval_command(CLI::App& app) {
  auto args = std::make_shared<EvalCommandArgs>();
  CLI::App* cmd = app.add_subcommand("eval", "Measure loss, perplexity and bits per byte");
  add_run_flags(cmd, args->run);
  add_eval_options(cmd, args->eval);
  cmd->add_flag("--json", args->json, "Print one JSON object");
  cmd->add_option("--logits", args->logits,
                  "Also write the first window's logits here: safetensors with tokens (T) and "
                  "logits (T, vocab)");
  return [args] { return run_eval(*args); };
}

}  // namespace tinylm
