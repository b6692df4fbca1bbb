// `tinylm sample RUN [--prompt TEXT] [--max-new-tokens N] [--temperature T] [--top-k K]
//                    [--top-p P] [--seed S] [--num-samples N]`
// Streams each sample to stdout as it is generated; a tokens/s line goes to stderr.

#include <ATen/CPUGeneratorImpl.h>

#include <chrono>
#include <optional>
#include <cstdio>

#include <spdlog/spdlog.h>

#include "model/generate.h"
#include "model/ablation.h"
#include "tools/commands.h"
#include "train/checkpoint.h"

namespace tinylm {

std::function<int()> add_sample_command(CLI::App& app) {
  struct Args {
    std::string run;
    std::optional<std::string> prompt;
    std::string ablate;
    std::optional<int64_t> max_new_tokens, top_k, seed, num_samples;
    std::optional<double> temperature, top_p;
    int threads = 0;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("sample", "Generate text from a trained run");
  cmd->add_option("run", args->run, "Run directory (or its best/)")->required();
  cmd->add_option("--prompt", args->prompt, "Text to continue (default: the run's sample.prompt)");
  cmd->add_option("--max-new-tokens", args->max_new_tokens, "Tokens to generate per sample");
  cmd->add_option("--temperature", args->temperature, "Softmax temperature; 0 = greedy");
  cmd->add_option("--top-k", args->top_k, "Keep the k most likely tokens; 0 = off");
  cmd->add_option("--top-p", args->top_p, "Nucleus sampling mass; 1 = off");
  cmd->add_option("--seed", args->seed, "Random seed");
  cmd->add_option("--num-samples", args->num_samples, "Number of samples");
  cmd->add_option("--ablate", args->ablate, "Zero these heads' outputs, e.g. 0.3,1.0 (LAYER.HEAD)");
  cmd->add_option("--threads", args->threads, "Intra-op threads (default: all cores)");

  return [args]() {
    set_threads(args->threads);
    const std::vector<HeadRef> ablated = parse_ablate_flag(args->ablate);
    LoadedRun run = load_run(args->run);
    const std::vector<HookHandle> ablation = ablate_from_flag(run.model, ablated);
    SampleConfig s = run.config.sample;
    if (args->prompt) s.prompt = *args->prompt;
    if (args->max_new_tokens) s.max_new_tokens = *args->max_new_tokens;
    if (args->top_k) s.top_k = *args->top_k;
    if (args->seed) s.seed = *args->seed;
    if (args->num_samples) s.num_samples = *args->num_samples;
    if (args->temperature) s.temperature = *args->temperature;
    if (args->top_p) s.top_p = *args->top_p;
    RunConfig checked = run.config;
    checked.sample = s;
    try {
      checked.validate();
    } catch (const std::invalid_argument& e) {
      std::string message = e.what();
      // Name the flag the user typed rather than the config key.
      for (const auto& [key, flag] : {std::pair{"sample.max_new_tokens", "--max-new-tokens"},
                                      {"sample.temperature", "--temperature"},
                                      {"sample.top_k", "--top-k"},
                                      {"sample.top_p", "--top-p"},
                                      {"sample.num_samples", "--num-samples"},
                                      {"sample.seed", "--seed"}}) {
        if (message.rfind(key, 0) == 0) message = flag + message.substr(std::string(key).size());
      }
      throw UsageError(message);
    }
    if (s.prompt.empty()) throw UsageError("--prompt is empty; give at least one character");
    const std::vector<int64_t> context = run.tokenizer->encode(s.prompt, "the prompt");
    if (static_cast<int64_t>(context.size()) > run.model->config().block_size) {
      spdlog::info("the prompt has {} tokens; the model sees the last {} (block_size)",
                   context.size(), run.model->config().block_size);
    }
    SamplingOptions options;
    options.temperature = s.temperature;
    options.top_k = s.top_k;
    options.top_p = s.top_p;
    auto rng = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(s.seed));

    const auto start = std::chrono::steady_clock::now();
    int64_t generated = 0;
    for (int64_t i = 0; i < s.num_samples; ++i) {
      std::fwrite(s.prompt.data(), 1, s.prompt.size(), stdout);
      generate(run.model, context, s.max_new_tokens, options, rng, [&](int64_t id) {
        const std::string piece = run.tokenizer->token_bytes(id);
        std::fwrite(piece.data(), 1, piece.size(), stdout);
        std::fflush(stdout);
        ++generated;
      });
      std::fputs(i + 1 < s.num_samples ? "\n---------------\n" : "\n", stdout);
      std::fflush(stdout);
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    spdlog::info("{} tokens in {:.2f} s ({:.0f} tokens/s)", generated, seconds,
                 static_cast<double>(generated) / seconds);
    return 0;
  };
}

}  // namespace tinylm
