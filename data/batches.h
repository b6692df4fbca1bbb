#pragma once
// Batches of windows from a split's tokens (the split itself is made by the token cache,
// data/token_cache.h). Two ways to draw windows of T + 1 tokens:
//   BatchSampler  B windows at offsets drawn uniformly from an explicit torch::Generator
//                 owned by the caller (nanoGPT's way), so runs are reproducible and resumable;
//   EpochSampler  every non-overlapping window [i*T, i*T + T] of the split exactly once per
//                 epoch, in an order shuffled afresh each epoch from (seed, epoch), so its
//                 whole state is two integers that a checkpoint saves.

#include <cstdint>
#include <string>
#include <utility>

#include <torch/torch.h>

#include "data/token_sequence.h"

namespace tinylm {

// Throws, naming `split`, when tokens has fewer than block_size + 1 entries.
void check_split_fits(const TokenSequence& tokens, int64_t block_size, const std::string& split);

class BatchSampler {
 public:
  BatchSampler(TokenSequence tokens, int64_t block_size, int64_t batch_size, std::string split);

  // x: (B, T) int64 windows; y: (B, T) the same windows shifted by one token.
  std::pair<torch::Tensor, torch::Tensor> sample(torch::Generator& generator) const;

 private:
  TokenSequence tokens_;
  int64_t block_size_;
  int64_t batch_size_;
};

// Where an EpochSampler stands: `position` windows of epoch `epoch` are drawn.
struct EpochPosition {
  int64_t epoch = 0;
  int64_t position = 0;
};

class EpochSampler {
 public:
  EpochSampler(TokenSequence tokens, int64_t block_size, int64_t batch_size, std::string split,
               uint64_t seed);

  std::pair<torch::Tensor, torch::Tensor> next();  // as BatchSampler::sample
  int64_t windows_per_epoch() const { return windows_; }
  // The window starts of `epoch` in the order they are drawn: (windows,) int64.
  torch::Tensor order(int64_t epoch) const;
  EpochPosition position() const { return position_; }
  // Continues from `position` (from a checkpoint); throws when it cannot belong to this split.
  void seek(EpochPosition position);

 private:
  TokenSequence tokens_;
  int64_t block_size_;
  int64_t batch_size_;
  uint64_t seed_;
  int64_t windows_;
  EpochPosition position_;
  torch::Tensor order_;  // of position_.epoch
};

}  // namespace tinylm
