#include "tools/sample_request.h"

#include "data/utf8.h"
#include "tools/cli.h"

namespace tinylm {

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

std::vector<int64_t> sample_context(const LoadedRun& run, const SampleConfig& s,
                                    const SampleArgs& args) {
  std::vector<int64_t> context = run.tokenizer->encode(s.prompt, "the prompt");
  if (args.bos) {
    const std::optional<int64_t> bos = run.tokenizer->bos_id();
    if (!bos) {
      throw UsageError("--bos: the run's tokenizer (" + run.tokenizer->describe() +
                       ") has no beginning-of-sequence token");
    }
    context.insert(context.begin(), *bos);
  }
  return context;
}

void add_sample_options(CLI::App* cmd, SampleArgs& a) {
  SampleArgs* args = &a;
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
  cmd->add_flag("--no-cache", args->no_cache,
                "Run the whole window for every token instead of using the KV cache");
}

SampleTexts::SampleTexts(const SampleConfig& s, bool raw_bytes)
    : texts_(static_cast<size_t>(s.num_samples), s.prompt),
      taken_(static_cast<size_t>(s.num_samples), 0),
      stop_(s.stop),
      raw_(raw_bytes) {}

bool SampleTexts::add(int64_t sample, const std::string& bytes) {
  std::string& text = texts_.at(static_cast<size_t>(sample));
  const size_t before = text.size();
  text += bytes;
  if (stop_.empty()) return true;
  // The first occurrence that ends in the new bytes (it may begin in the prompt).
  const size_t from = before >= stop_.size() ? before - stop_.size() + 1 : 0;
  if (const size_t at = text.find(stop_, from); at != std::string::npos) {
    text.resize(at + stop_.size());
    return false;
  }
  return true;
}

std::string SampleTexts::take(int64_t sample, bool final) {
  const std::string_view rest = std::string_view(texts_.at(static_cast<size_t>(sample)))
                                    .substr(taken_[static_cast<size_t>(sample)]);
  if (raw_) {
    taken_[static_cast<size_t>(sample)] += rest.size();
    return std::string(rest);
  }
  size_t used = 0;
  std::string text = printable_utf8(rest, final, used, replaced_);
  taken_[static_cast<size_t>(sample)] += used;
  return text;
}

}  // namespace tinylm
