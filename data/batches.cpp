#include "data/batches.h"

#include <ATen/CPUGeneratorImpl.h>

#include <stdexcept>

namespace tinylm {

void check_split_fits(const TokenSequence& tokens, int64_t block_size, const std::string& split) {
  if (tokens.size() < block_size + 1) {
    throw std::runtime_error(
        "the " + split + " split has " + std::to_string(tokens.size()) +
        " tokens, fewer than block_size + 1 = " + std::to_string(block_size + 1) +
        "; use a larger corpus, a smaller model.block_size, or change "
        "data.train_fraction");
  }
}

namespace {

// Copies the windows starting at `starts` into x and, shifted by one, y.
std::pair<torch::Tensor, torch::Tensor> gather_windows(const TokenSequence& tokens,
                                                       const int64_t* starts, int64_t batch,
                                                       int64_t block) {
  torch::Tensor x = torch::empty({batch, block}, torch::kInt64);  // (B, T)
  torch::Tensor y = torch::empty({batch, block}, torch::kInt64);  // (B, T)
  std::vector<int64_t> window(static_cast<size_t>(block + 1));
  for (int64_t b = 0; b < batch; ++b) {
    tokens.copy_to(starts[b], block + 1, window.data());
    std::copy(window.begin(), window.end() - 1, x.data_ptr<int64_t>() + b * block);
    std::copy(window.begin() + 1, window.end(), y.data_ptr<int64_t>() + b * block);
  }
  return {x, y};
}

}  // namespace

BatchSampler::BatchSampler(TokenSequence tokens, int64_t block_size, int64_t batch_size,
                           std::string split)
    : tokens_(std::move(tokens)), block_size_(block_size), batch_size_(batch_size) {
  check_split_fits(tokens_, block_size, split);
}

std::pair<torch::Tensor, torch::Tensor> BatchSampler::sample(torch::Generator& generator) const {
  const int64_t n_starts = tokens_.size() - block_size_;
  const torch::Tensor starts = torch::randint(n_starts, {batch_size_}, generator,
                                              torch::TensorOptions().dtype(torch::kInt64));
  return gather_windows(tokens_, starts.data_ptr<int64_t>(), batch_size_, block_size_);
}

EpochSampler::EpochSampler(TokenSequence tokens, int64_t block_size, int64_t batch_size,
                           std::string split, uint64_t seed)
    : tokens_(std::move(tokens)), block_size_(block_size), batch_size_(batch_size), seed_(seed) {
  check_split_fits(tokens_, block_size, split);
  windows_ = (tokens_.size() - 1) / block_size_;
  order_ = order(0);
}

torch::Tensor EpochSampler::order(int64_t epoch) const {
  // A generator per epoch, so that the order of any epoch is known without the ones before.
  auto generator = at::make_generator<at::CPUGeneratorImpl>(seed_ * 0x9E3779B97F4A7C15ULL +
                                                            static_cast<uint64_t>(epoch) + 1);
  return torch::randperm(windows_, generator, torch::TensorOptions().dtype(torch::kInt64)) *
         block_size_;
}

void EpochSampler::seek(EpochPosition position) {
  if (position.epoch < 0 || position.position < 0 || position.position > windows_) {
    throw std::runtime_error("epoch position " + std::to_string(position.epoch) + ":" +
                             std::to_string(position.position) + " does not fit a split of " +
                             std::to_string(windows_) + " windows");
  }
  if (position.epoch != position_.epoch) order_ = order(position.epoch);
  position_ = position;
}

std::pair<torch::Tensor, torch::Tensor> EpochSampler::next() {
  std::vector<int64_t> starts(static_cast<size_t>(batch_size_));
  for (int64_t& start : starts) {
    if (position_.position == windows_) seek({position_.epoch + 1, 0});
    start = order_.data_ptr<int64_t>()[position_.position++];
  }
  return gather_windows(tokens_, starts.data(), batch_size_, block_size_);
}

}  // namespace tinylm
