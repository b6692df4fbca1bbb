#pragma once
// The tokens a run trains and validates on, from its config: one place for prepare, train,
// eval and inspect to get the same tokens. A file corpus goes through the token cache
// (data/token_cache.h) in data.cache_dir; the synthetic induction corpus is generated and
// tokenized in memory. The tokenizer is built here from the [data] settings: the character
// set of the corpus, bytes, or SentencePiece trained on the train part of the text (or loaded
// from data.tokenizer_model).

#include <memory>
#include <string>

#include "data/token_sequence.h"
#include "data/tokenizer.h"
#include "train/run/run_config.h"

namespace tinylm {

struct RunData {
  std::string cache_dir;  // the token cache directory used (empty for a generated corpus)
  std::shared_ptr<const Tokenizer> tokenizer;
  TokenSplit train;
  TokenSplit val;
};

struct RunDataOptions {
  // The run's own tokenizer (eval, inspect, resume): the tokens must come from it.
  std::shared_ptr<const Tokenizer> tokenizer;
  bool progress = true;  // a progress line while tokenizing, when stderr is a terminal
  int threads = 0;       // encoding threads; 0: all cores
  bool force = false;    // rebuild the token cache even when it is current
};

// Reuses the token cache when it is current, else rebuilds it (saying why).
RunData load_run_data(const RunConfig& config, const RunDataOptions& options = {});

// "data/corpora/x.txt", or "the synthetic induction corpus (1000000 characters)".
std::string describe_corpus(const RunConfig& config);

}  // namespace tinylm
