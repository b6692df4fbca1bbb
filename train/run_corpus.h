#pragma once
// The text a run trains on, from a file or generated (data.source), and its splits as
// tokens: one place for train, eval and inspect to get the same tokens.

#include <string>

#include <torch/torch.h>

#include "data/char_tokenizer.h"
#include "train/run_config.h"

namespace tinylm {

// Throws std::runtime_error naming the corpus when it cannot be read.
std::string read_run_corpus(const RunConfig& config);

// "data/corpora/x.txt", or "the synthetic induction corpus (1000000 characters)".
std::string describe_corpus(const RunConfig& config);

// The "train" or "val" split of the run's corpus as (N,) int64 tokens.
torch::Tensor run_split(const RunConfig& config, const CharTokenizer& tokenizer,
                        const std::string& split);

}  // namespace tinylm
