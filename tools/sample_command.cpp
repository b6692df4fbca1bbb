// `tinylm sample RUN [--prompt TEXT] [--max-new-tokens N] [--temperature T] [--top-k K]
//                    [--top-p P] [--seed S] [--num-samples N] [--stop TEXT] [--no-cache]`
// The samples are drawn in one batch. The first streams to stdout as it is generated, the
// others follow in order when the batch is done; a tokens/s line goes to stderr.

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
    std::optional<std::string> stop;
    bool no_cache = false;
    std::optional<int64_t> max_new_tokens, top_k, seed, num_samples;
    std::optional<double> temperature, top_p;
    int threads = 0;
    std::string device = "cpu";
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
  cmd->add_option("--num-samples", args->num_samples, "Number of samples, drawn in one batch");
  cmd->add_option("--stop", args->stop,
                  "End a sample after the first occurrence of this text (kept in the output)");
  cmd->add_flag("--no-cache", args->no_cache,
                "Run the whole window for every token instead of using the KV cache");
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
    SampleConfig s = run.config.sample;
    if (args->prompt) s.prompt = *args->prompt;
    if (args->max_new_tokens) s.max_new_tokens = *args->max_new_tokens;
    if (args->top_k) s.top_k = *args->top_k;
    if (args->seed) s.seed = *args->seed;
    if (args->num_samples) s.num_samples = *args->num_samples;
    if (args->temperature) s.temperature = *args->temperature;
    if (args->top_p) s.top_p = *args->top_p;
    if (args->stop) s.stop = *args->stop;
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
    GenerationOptions options;
    options.max_new_tokens = s.max_new_tokens;
    options.num_samples = s.num_samples;
    options.sampling.temperature = s.temperature;
    options.sampling.top_k = s.top_k;
    options.sampling.top_p = s.top_p;
    options.use_cache = !args->no_cache;
    auto rng = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(s.seed));

    // Each sample's text; sample 0 streams, so `printed` is how much of it is out.
    std::vector<std::string> texts(static_cast<size_t>(s.num_samples), s.prompt);
    size_t printed = 0;
    const auto print_sample = [&](size_t i) {
      std::fwrite(texts[i].data() + printed, 1, texts[i].size() - printed, stdout);
      std::fputs(i + 1 < texts.size() ? "\n---------------\n" : "\n", stdout);
      std::fflush(stdout);
      printed = 0;
    };
    int64_t generated = 0;
    const auto start = std::chrono::steady_clock::now();
    generate(run.model, context, options, rng, [&](int64_t sample, int64_t id) {
      std::string& text = texts[static_cast<size_t>(sample)];
      const size_t before = text.size();
      text += run.tokenizer->token_bytes(id);
      ++generated;
      bool more = true;
      if (!s.stop.empty()) {
        // The first occurrence that ends in the new bytes (it may begin in the prompt).
        const size_t from = before >= s.stop.size() ? before - s.stop.size() + 1 : 0;
        if (const size_t at = text.find(s.stop, from); at != std::string::npos) {
          text.resize(at + s.stop.size());
          more = false;
        }
      }
      if (sample == 0) {
        std::fwrite(text.data() + printed, 1, text.size() - printed, stdout);
        std::fflush(stdout);
        printed = text.size();
      }
      return more;
    });
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    for (size_t i = 0; i < texts.size(); ++i) print_sample(i);
    spdlog::info("{} tokens in {:.2f} s: {:.0f} tokens/s ({} sample{} in one batch, KV cache {})",
                 generated, seconds, static_cast<double>(generated) / seconds, s.num_samples,
                 s.num_samples == 1 ? "" : "s", options.use_cache ? "on" : "off");
    return 0;
  };
}

}  // namespace tinylm
