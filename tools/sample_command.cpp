// `tinylm sample RUN [--prompt TEXT] [--max-new-tokens N] [--temperature T] [--top-k K]
//                    [--top-p P] [--seed S] [--num-samples N] [--stop TEXT] [--no-cache]
//                    [--bos]`
// The samples are drawn in one batch. --bos starts the context with the tokenizer's
// beginning-of-sequence token, as llama2.c's run.c always does (then --prompt may be empty). The
// first streams to stdout as it is generated, the others follow in order when the batch is done; a
// tokens/s line goes to stderr.

#include <ATen/CPUGeneratorImpl.h>

#include <chrono>
#include <cstdio>
#include <optional>

#include <spdlog/spdlog.h>

#include "model/generate.h"
#include "tools/cli.h"
#include "tools/commands.h"
#include "tools/sample_request.h"

namespace tinylm {
namespace {

struct SampleCommandArgs {
  RunFlags run;
  SampleArgs sample;
  bool bytes = false;  // write the tokens' bytes as they are, valid UTF-8 or not
};

int run_sample(const SampleCommandArgs& args) {
  OpenRun open = open_run(args.run);
  LoadedRun& run = open.run;
  const SampleConfig s = sample_config(run.config, args.sample);
  const std::vector<int64_t> context = sample_context(run, s, args.sample);
  if (static_cast<int64_t>(context.size()) > run.model->config().block_size) {
    spdlog::info("the prompt has {} tokens; the model sees the last {} (block_size)",
                 context.size(), run.model->config().block_size);
  }
  GenerationOptions options;
  options.max_new_tokens = s.max_new_tokens;
  options.num_samples = s.num_samples;
  options.sampling = s.sampling();
  options.use_cache = !args.sample.no_cache;
  auto rng = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(s.seed));

  // The first sample streams to stdout as it is generated; the others follow in order when
  // the batch is done, separated by a rule.
  SampleTexts texts(s, args.bytes);
  const auto write = [](const std::string& text) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
  };
  int64_t generated = 0;
  const auto start = std::chrono::steady_clock::now();
  generate(run.model, context, options, rng, [&](int64_t sample, int64_t id) {
    ++generated;
    const bool more = texts.add(sample, run.tokenizer->token_bytes(id));
    if (sample == 0) write(texts.take(0, false));
    return more;
  });
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (int64_t i = 0; i < texts.samples(); ++i)
    write(texts.take(i, true) + (i + 1 < texts.samples() ? "\n---------------\n" : "\n"));
  if (const size_t n = texts.replaced(); n > 0) {
    spdlog::warn(
        "{} byte{} of the samples {} not UTF-8 and {} shown as U+FFFD; --bytes writes them as "
        "they are",
        n, n == 1 ? "" : "s", n == 1 ? "was" : "were", n == 1 ? "is" : "are");
  }
  spdlog::info("{} tokens in {:.2f} s: {:.0f} tokens/s ({} sample{} in one batch, KV cache {})",
               generated, seconds, static_cast<double>(generated) / seconds, s.num_samples,
               s.num_samples == 1 ? "" : "s", options.use_cache ? "on" : "off");
  return 0;
}

}  // namespace

Command add_sample_command(CLI::App& app) {
  auto args = std::make_shared<SampleCommandArgs>();
  CLI::App* cmd = app.add_subcommand("sample", "Generate text from a trained run");
  add_run_flags(cmd, args->run);
  add_sample_options(cmd, args->sample);
  cmd->add_flag("--bytes", args->bytes,
                "Write the tokens' bytes as they are; by default bytes that are not UTF-8 (a "
                "byte model's) are written as U+FFFD");
  return [args] { return run_sample(*args); };
}

}  // namespace tinylm
