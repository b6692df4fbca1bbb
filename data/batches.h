#pragma once
// Token splits and random-window batches. The first `train_fraction` of the tokens train,
// the rest validate (nanoGPT's split). A batch is B windows at offsets drawn uniformly from
// an explicit torch::Generator owned by the caller, so runs are reproducible and resumable.

#include <string>
#include <utility>

#include <torch/torch.h>

namespace tinylm {

struct TokenSplits {
  torch::Tensor train;  // (N_train,) int64
  torch::Tensor val;    // (N_val,) int64
};

// Splits at floor(train_fraction * N), as nanoGPT does.
TokenSplits split_tokens(const torch::Tensor& tokens, double train_fraction);

class BatchSampler {
 public:
  // Throws, naming `split`, when tokens has fewer than block_size + 1 entries.
  BatchSampler(torch::Tensor tokens, int64_t block_size, int64_t batch_size, std::string split);

  // x: (B, T) int64 windows; y: (B, T) the same windows shifted by one token.
  std::pair<torch::Tensor, torch::Tensor> sample(torch::Generator& generator) const;

 private:
  torch::Tensor tokens_;
  int64_t block_size_;
  int64_t batch_size_;
};

}  // namespace tinylm
