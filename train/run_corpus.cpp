#include "train/run_corpus.h"

#include <stdexcept>

#include "data/batches.h"
#include "data/corpus.h"
#include "data/induction_corpus.h"

namespace tinylm {

std::string read_run_corpus(const RunConfig& config) {
  if (config.data.source == "induction") {
    return induction_corpus(config.data.synthetic_size, static_cast<uint64_t>(config.train.seed));
  }
  return read_corpus(config.data.path);
}

std::string describe_corpus(const RunConfig& config) {
  if (config.data.source == "induction") {
    return "the synthetic induction corpus (" + std::to_string(config.data.synthetic_size) +
           " characters, seed " + std::to_string(config.train.seed) + ")";
  }
  return config.data.path;
}

torch::Tensor run_split(const RunConfig& config, const CharTokenizer& tokenizer,
                        const std::string& split) {
  std::vector<int64_t> ids = tokenizer.encode(read_run_corpus(config), describe_corpus(config));
  const torch::Tensor tokens =
      torch::from_blob(ids.data(), {static_cast<int64_t>(ids.size())}, torch::kInt64).clone();
  const TokenSplits splits = split_tokens(tokens, config.data.train_fraction);
  if (split == "train") return splits.train;
  if (split == "val") return splits.val;
  throw std::invalid_argument("unknown split \"" + split + "\" (train or val)");
}

}  // namespace tinylm
