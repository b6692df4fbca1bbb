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

#include "data/utf8.h"
#include "model/generate.h"
#include "tools/cli.h"
#include "tools/commands.h"

namespace tinylm {
namespace {

struct SampleArgs {
  RunFlags run;
  std::optional<std::string> prompt, stop;
  std::optional<int64_t> max_new_tokens, top_k, seed, num_samples;
  std::optional<double> temperature, top_p;
  bool no_cache = false;
  bool bos = false;
  bool bytes = false;  // write the tokens' bytes as they are, valid UTF-8 or not
};

// The run's [sample] section with the flags given on top, checked by the config's rules
// and reported under the flag's name.
SampleConfig sample_config(const RunConfig& config, const SampleArgs& args) {
  RunConfig checked = config;
  SampleConfig& s = checked.sample;
  if (args.prompt) {
    s.prompt = *args.prompt;
  } else if (args.bos) {
    s.prompt.clear();  // --bos alone starts from the BOS token alone, as run.c does
  }
  if (args.stop) s.stop = *args.stop;
  if (args.max_new_tokens) s.max_new_tokens = *args.max_new_tokens;
  if (args.top_k) s.top_k = *args.top_k;
  if (args.seed) s.seed = *args.seed;
  if (args.num_samples) s.num_samples = *args.num_samples;
  if (args.temperature) s.temperature = *args.temperature;
  if (args.top_p) s.top_p = *args.top_p;
  try {
    checked.validate();
  } catch (const std::invalid_argument& e) {
    std::string message = e.what();
    for (const auto& [key, flag] : {std::pair{"sample.max_new_tokens", "--max-new-tokens"},
                                    {"sample.temperature", "--temperature"},
                                    {"sample.top_k", "--top-k"},
                                    {"sample.top_p", "--top-p"},
                                    {"sample.num_samples", "--num-samples"},
                                    {"sample.seed", "--seed"},
                                    {"sample.prompt", "--prompt"},
                                    {"sample.stop", "--stop"}}) {
      if (message.rfind(key, 0) == 0) message = flag + message.substr(std::string(key).size());
    }
    throw UsageError(message);
  }
  if (s.prompt.empty() && !args.bos)
    throw UsageError("--prompt is empty; give at least one character (or --bos)");
  return s;
}

// Each sample's text as it grows: sample 0 is streamed to stdout, the others are printed
// when the batch is done. A sample with a stop text ends after its first occurrence. A byte
// or byte-fallback model can emit bytes that are not UTF-8: they are written as U+FFFD
// (a character split across tokens waits for its last byte), unless `raw_bytes`.
class SampleTexts {
 public:
  SampleTexts(const SampleConfig& s, bool raw_bytes)
      : texts_(static_cast<size_t>(s.num_samples), s.prompt), stop_(s.stop), raw_(raw_bytes) {}

  // Adds a token's bytes to a sample; returns whether that sample wants more.
  bool add(int64_t sample, const std::string& bytes) {
    std::string& text = texts_[static_cast<size_t>(sample)];
    const size_t before = text.size();
    text += bytes;
    bool more = true;
    if (!stop_.empty()) {
      // The first occurrence that ends in the new bytes (it may begin in the prompt).
      const size_t from = before >= stop_.size() ? before - stop_.size() + 1 : 0;
      if (const size_t at = text.find(stop_, from); at != std::string::npos) {
        text.resize(at + stop_.size());
        more = false;
      }
    }
    if (sample == 0) {
      streamed_ += write(std::string_view(text).substr(streamed_), false);
      std::fflush(stdout);
    }
    return more;
  }

  // The rest of sample 0, then every other sample, separated by a rule.
  void print_rest() {
    for (size_t i = 0; i < texts_.size(); ++i) {
      write(std::string_view(texts_[i]).substr(i == 0 ? streamed_ : 0), true);
      std::fputs(i + 1 < texts_.size() ? "\n---------------\n" : "\n", stdout);
    }
    std::fflush(stdout);
    if (replaced_ > 0) {
      spdlog::warn(
          "{} byte{} of the samples {} not UTF-8 and {} shown as U+FFFD; --bytes writes "
          "them as they are",
          replaced_, replaced_ == 1 ? "" : "s", replaced_ == 1 ? "was" : "were",
          replaced_ == 1 ? "is" : "are");
    }
  }

 private:
  // Writes what of `bytes` can be written now; returns how many bytes that covered.
  size_t write(std::string_view bytes, bool final) {
    if (raw_) {
      std::fwrite(bytes.data(), 1, bytes.size(), stdout);
      return bytes.size();
    }
    size_t used = 0;
    const std::string text = printable_utf8(bytes, final, used, replaced_);
    std::fwrite(text.data(), 1, text.size(), stdout);
    return used;
  }

  std::vector<std::string> texts_;
  std::string stop_;
  bool raw_;
  size_t streamed_ = 0;
  size_t replaced_ = 0;
};

int run_sample(const SampleArgs& args) {
  OpenRun open = open_run(args.run);
  LoadedRun& run = open.run;
  const SampleConfig s = sample_config(run.config, args);
  std::vector<int64_t> context = run.tokenizer->encode(s.prompt, "the prompt");
  if (args.bos) {
    const std::optional<int64_t> bos = run.tokenizer->bos_id();
    if (!bos) {
      throw UsageError("--bos: the run's tokenizer (" + run.tokenizer->describe() +
                       ") has no beginning-of-sequence token");
    }
    context.insert(context.begin(), *bos);
  }
  if (static_cast<int64_t>(context.size()) > run.model->config().block_size) {
    spdlog::info("the prompt has {} tokens; the model sees the last {} (block_size)",
                 context.size(), run.model->config().block_size);
  }
  GenerationOptions options;
  options.max_new_tokens = s.max_new_tokens;
  options.num_samples = s.num_samples;
  options.sampling = s.sampling();
  options.use_cache = !args.no_cache;
  auto rng = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(s.seed));

  SampleTexts texts(s, args.bytes);
  int64_t generated = 0;
  const auto start = std::chrono::steady_clock::now();
  generate(run.model, context, options, rng, [&](int64_t sample, int64_t id) {
    ++generated;
    return texts.add(sample, run.tokenizer->token_bytes(id));
  });
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  texts.print_rest();
  spdlog::info("{} tokens in {:.2f} s: {:.0f} tokens/s ({} sample{} in one batch, KV cache {})",
               generated, seconds, static_cast<double>(generated) / seconds, s.num_samples,
               s.num_samples == 1 ? "" : "s", options.use_cache ? "on" : "off");
  return 0;
}

}  // namespace

Command add_sample_command(CLI::App& app) {
  auto args = std::make_shared<SampleArgs>();
  CLI::App* cmd = app.add_subcommand("sample", "Generate text from a trained run");
  add_run_flags(cmd, args->run);
  cmd->add_option("--prompt", args->prompt, "Text to continue (default: the run's sample.prompt)");
  // Checked as numbers here; the ranges are the [sample] keys', checked in sample_config.
  cmd->add_option("--max-new-tokens", args->max_new_tokens, "Tokens to generate per sample")
      ->check(integer_flag(anything()));
  cmd->add_option("--temperature", args->temperature, "Softmax temperature; 0 = greedy")
      ->check(number_flag(anything()));
  cmd->add_option("--top-k", args->top_k, "Keep the k most likely tokens; 0 = off")
      ->check(integer_flag(anything()));
  cmd->add_option("--top-p", args->top_p, "Nucleus sampling mass; 1 = off")
      ->check(number_flag(anything()));
  cmd->add_option("--seed", args->seed, "Random seed")->check(integer_flag(anything()));
  cmd->add_option("--num-samples", args->num_samples, "Number of samples, drawn in one batch")
      ->check(integer_flag(anything()));
  cmd->add_option("--stop", args->stop,
                  "End a sample after the first occurrence of this text (kept in the output)");
  cmd->add_flag("--bos", args->bos,
                "Start the context with the tokenizer's beginning-of-sequence token "
                "(SentencePiece's <s>, GPT-2's <|endoftext|>), as llama2.c's run.c does");
  cmd->add_flag("--bytes", args->bytes,
                "Write the tokens' bytes as they are; by default bytes that are not UTF-8 (a "
                "byte model's) are written as U+FFFD");
  cmd->add_flag("--no-cache", args->no_cache,
                "Run the whole window for every token instead of using the KV cache");
  return [args] { return run_sample(*args); };
}

}  // namespace tinylm
