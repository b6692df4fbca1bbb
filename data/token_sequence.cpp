#include "data/token_sequence.h"

#include <cstring>
#include <stdexcept>
#include <string>

namespace tinylm {

TokenSequence::TokenSequence(std::shared_ptr<const void> owner, const void* data, int width,
                             int64_t size)
    : owner_(std::move(owner)),
      data_(static_cast<const unsigned char*>(data)),
      width_(width),
      size_(size) {
  if (width != 2 && width != 4 && width != 8) {
    throw std::invalid_argument("token width must be 2, 4 or 8 bytes (got " +
                                std::to_string(width) + ")");
  }
}

TokenSequence TokenSequence::from_ids(std::vector<int64_t> ids) {
  auto owned = std::make_shared<std::vector<int64_t>>(std::move(ids));
  return TokenSequence(owned, owned->data(), 8, static_cast<int64_t>(owned->size()));
}

int64_t TokenSequence::at(int64_t i) const {
  int64_t id = 0;
  copy_to(i, 1, &id);
  return id;
}

void TokenSequence::copy_to(int64_t start, int64_t count, int64_t* out) const {
  if (start < 0 || count < 0 || start + count > size_) {
    throw std::out_of_range("tokens [" + std::to_string(start) + ", " +
                            std::to_string(start + count) + ") are outside a sequence of " +
                            std::to_string(size_));
  }
  const unsigned char* src = data_ + static_cast<size_t>(start) * static_cast<size_t>(width_);
  switch (width_) {
    case 8: std::memcpy(out, src, static_cast<size_t>(count) * 8); break;
    case 4:
      for (int64_t i = 0; i < count; ++i) {
        uint32_t v;
        std::memcpy(&v, src + 4 * i, 4);
        out[i] = v;
      }
      break;
    default:
      for (int64_t i = 0; i < count; ++i) {
        uint16_t v;
        std::memcpy(&v, src + 2 * i, 2);
        out[i] = v;
      }
  }
}

TokenSequence TokenSequence::slice(int64_t begin, int64_t end) const {
  if (begin < 0 || end < begin || end > size_) {
    throw std::out_of_range("slice [" + std::to_string(begin) + ", " + std::to_string(end) +
                            ") is outside a sequence of " + std::to_string(size_));
  }
  return TokenSequence(owner_, data_ + static_cast<size_t>(begin) * static_cast<size_t>(width_),
                       width_, end - begin);
}

torch::Tensor TokenSequence::to_tensor() const {
  torch::Tensor out = torch::empty({size_}, torch::kInt64);  // (N,)
  copy_to(0, size_, out.data_ptr<int64_t>());
  return out;
}

}  // namespace tinylm
