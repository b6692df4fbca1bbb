#include "data/batches.h"

#include <cstring>
#include <stdexcept>

namespace tinylm {

TokenSplits split_tokens(const torch::Tensor& tokens, double train_fraction) {
  const int64_t n = tokens.numel();
  const auto n_train = static_cast<int64_t>(train_fraction * static_cast<double>(n));
  return {tokens.slice(0, 0, n_train), tokens.slice(0, n_train, n)};
}

BatchSampler::BatchSampler(torch::Tensor tokens, int64_t block_size, int64_t batch_size,
                           std::string split)
    : tokens_(tokens.to(torch::kInt64).contiguous()),
      block_size_(block_size),
      batch_size_(batch_size) {
  if (tokens_.numel() < block_size + 1) {
    throw std::runtime_error("the " + split + " split has " + std::to_string(tokens_.numel()) +
                             " tokens, fewer than block_size + 1 = " +
                             std::to_string(block_size + 1) +
                             "; use a larger corpus, a smaller model.block_size, or change "
                             "data.train_fraction");
  }
}

std::pair<torch::Tensor, torch::Tensor> BatchSampler::sample(torch::Generator& generator) const {
  const int64_t n_starts = tokens_.numel() - block_size_;
  const torch::Tensor starts = torch::randint(n_starts, {batch_size_}, generator,
                                              torch::TensorOptions().dtype(torch::kInt64));
  torch::Tensor x = torch::empty({batch_size_, block_size_}, torch::kInt64);  // (B, T)
  torch::Tensor y = torch::empty({batch_size_, block_size_}, torch::kInt64);  // (B, T)
  const int64_t* src = tokens_.data_ptr<int64_t>();
  const int64_t* start = starts.data_ptr<int64_t>();
  const size_t row_bytes = static_cast<size_t>(block_size_) * sizeof(int64_t);
  for (int64_t b = 0; b < batch_size_; ++b) {
    std::memcpy(x.data_ptr<int64_t>() + b * block_size_, src + start[b], row_bytes);
    std::memcpy(y.data_ptr<int64_t>() + b * block_size_, src + start[b] + 1, row_bytes);
  }
  return {x, y};
}

}  // namespace tinylm
