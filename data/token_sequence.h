#pragma once
// A read-only run of token ids, wherever they live: a vector in memory, or a memory-mapped
// token file of uint16 or uint32 (data/token_file.h). Slicing shares the storage; reading
// widens to int64 only the window asked for, so a split larger than memory costs nothing
// until it is read.

#include <cstdint>
#include <memory>
#include <vector>

#include <torch/torch.h>

namespace tinylm {

class TokenSequence {
 public:
  TokenSequence() = default;
  // `data` holds `size` ids of `width` bytes (2, 4 or 8) and lives as long as `owner`.
  TokenSequence(std::shared_ptr<const void> owner, const void* data, int width, int64_t size);
  static TokenSequence from_ids(std::vector<int64_t> ids);

  int64_t size() const { return size_; }
  int64_t at(int64_t i) const;
  // Copies ids [start, start + count) into `out`; the range must be inside.
  void copy_to(int64_t start, int64_t count, int64_t* out) const;
  TokenSequence slice(int64_t begin, int64_t end) const;
  // (N,) int64, a copy.
  torch::Tensor to_tensor() const;

 private:
  std::shared_ptr<const void> owner_;
  const unsigned char* data_ = nullptr;
  int width_ = 8;
  int64_t size_ = 0;
};

// A split's tokens and the UTF-8 bytes they stand for, so that a loss per token becomes
// bits per byte: bits/byte = loss / ln 2 * tokens / bytes.
struct TokenSplit {
  TokenSequence tokens;
  uint64_t text_bytes = 0;
  double tokens_per_byte() const {
    return text_bytes ? static_cast<double>(tokens.size()) / static_cast<double>(text_bytes) : 1.0;
  }
};

}  // namespace tinylm
