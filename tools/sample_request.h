#pragma once
// What `tinylm sample` asks for: one code path for the CLI and the lab's GET /api/sample,
// which binds the same flags to query parameters (see tools/inspect/inspect_request.h).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "train/run/checkpoint.h"
#include "train/run/run_config.h"

namespace tinylm {

// The flags given; what is not given comes from the run's [sample] section.
struct SampleArgs {
  std::optional<std::string> prompt, stop;
  std::optional<int64_t> max_new_tokens, top_k, seed, num_samples;
  std::optional<double> temperature, top_p;
  bool no_cache = false;
  bool bos = false;
};

// --prompt, --max-new-tokens, --temperature, --top-k, --top-p, --seed, --num-samples,
// --stop, --bos and --no-cache.
void add_sample_options(CLI::App* cmd, SampleArgs& args);

// The run's [sample] section with the flags given on top, checked by the config's rules and
// reported under the flag's name (a UsageError).
SampleConfig sample_config(const RunConfig& config, const SampleArgs& args);

// The prompt's ids, after the BOS token with --bos (a UsageError when the tokenizer has none).
std::vector<int64_t> sample_context(const LoadedRun& run, const SampleConfig& s,
                                    const SampleArgs& args);

// Each sample's text as it grows, with the prompt before it. A sample with a stop text ends
// after its first occurrence. A byte or byte-fallback model can emit bytes that are not
// UTF-8: take() gives them as U+FFFD (a character split across tokens waits for its last
// byte), unless `raw_bytes`.
class SampleTexts {
 public:
  SampleTexts(const SampleConfig& s, bool raw_bytes);

  // Adds a token's bytes to a sample; returns whether that sample wants more.
  bool add(int64_t sample, const std::string& bytes);
  // What of a sample's text has not been taken yet and can be shown now: all of it when
  // `final`, else up to a character still incomplete.
  std::string take(int64_t sample, bool final);
  int64_t samples() const { return static_cast<int64_t>(texts_.size()); }
  // Bytes shown as U+FFFD so far.
  size_t replaced() const { return replaced_; }

 private:
  std::vector<std::string> texts_;
  std::vector<size_t> taken_;
  std::string stop_;
  bool raw_;
  size_t replaced_ = 0;
};

}  // namespace tinylm
