#pragma once
// The keys and values of the positions a generation has seen, per layer, so that each new
// token's are computed once. Holds at most block_size positions. When it is full:
//   - relative positions (rope, none, relative, alibi): the oldest positions are dropped
//     and generation goes on; keys keep their absolute rotation, and a score bias is a
//     function of i - j alone, which is all a score depends on;
//   - absolute positions (learned, sinusoidal): every cached key carries its position in the
//     window, which shifts with each token; the caller encodes the window without the cache.
// Storage (B, n_kv_head, 2 block_size, hs) per layer is allocated at the first append. The
// held positions are a contiguous range of it that moves forward as the oldest are dropped;
// only when it reaches the end is it copied back to the start, once every block_size
// tokens rather than on every token.

#include <cstdint>
#include <utility>
#include <vector>

#include <torch/torch.h>

namespace tinylm {

class KVCache {
 public:
  KVCache(int64_t n_layer, int64_t capacity)
      : k_(static_cast<size_t>(n_layer)), v_(static_cast<size_t>(n_layer)), capacity_(capacity) {}

  int64_t length() const { return length_; }      // positions held
  int64_t capacity() const { return capacity_; }  // block_size
  // The absolute position of the next token: counts the dropped ones too.
  int64_t next_position() const { return dropped_ + length_; }

  void clear() { length_ = 0, dropped_ = 0, offset_ = 0; }

  // Drops the oldest positions so that n more fit. Throws when n > capacity.
  void make_room(int64_t n);

  // Writes layer `layer`'s k and v (B, n_kv, T, hs) after the held positions and returns the
  // whole (B, n_kv, length + T, hs) of that layer. The length moves on in advance(), once
  // every layer has appended.
  std::pair<torch::Tensor, torch::Tensor> append(size_t layer, const torch::Tensor& k,
                                                 const torch::Tensor& v);
  void advance(int64_t n) { length_ += n; }

  // Layer `layer`'s whole storage (B, n_kv, 2 capacity, hs), undefined before its first
  // append, and where the held positions begin in it: for code that writes the next
  // position (at offset() + length()) itself, after make_room(1), then calls advance().
  const torch::Tensor& keys(size_t layer) const { return k_.at(layer); }
  const torch::Tensor& values(size_t layer) const { return v_.at(layer); }
  int64_t offset() const { return offset_; }

 private:
  std::vector<torch::Tensor> k_, v_;  // (B, n_kv, 2 capacity, hs) each
  int64_t capacity_;
  int64_t length_ = 0;
  int64_t dropped_ = 0;
  int64_t offset_ = 0;  // the storage index of the oldest held position
};

}  // namespace tinylm
