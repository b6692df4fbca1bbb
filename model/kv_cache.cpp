#include "model/kv_cache.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace tinylm {

void KVCache::make_room(int64_t n) {
  if (n > capacity_) {
    throw std::invalid_argument(std::to_string(n) + " positions do not fit a KV cache of " +
                                std::to_string(capacity_) + " (block_size)");
  }
  const int64_t drop = std::max<int64_t>(0, length_ + n - capacity_);
  offset_ += drop;
  length_ -= drop;
  dropped_ += drop;
  if (length_ == 0) offset_ = 0;
  if (offset_ + length_ + n <= 2 * capacity_) return;
  // The range reached the end of the storage: move it to the start. The two do not overlap:
  // length_ + n <= capacity_ < offset_ here.
  for (auto* stores : {&k_, &v_}) {
    for (torch::Tensor& t : *stores) {
      if (t.defined()) t.narrow(2, 0, length_).copy_(t.narrow(2, offset_, length_));
    }
  }
  offset_ = 0;
}

std::pair<torch::Tensor, torch::Tensor> KVCache::append(size_t layer, const torch::Tensor& k,
                                                        const torch::Tensor& v) {
  const int64_t T = k.size(2);
  if (length_ + T > capacity_ || offset_ + length_ + T > 2 * capacity_) {
    throw std::invalid_argument("KV cache of " + std::to_string(capacity_) + " positions holds " +
                                std::to_string(length_) + "; " + std::to_string(T) +
                                " more do not fit (make_room first)");
  }
  torch::Tensor& ks = k_.at(layer);
  torch::Tensor& vs = v_.at(layer);
  if (!ks.defined() || ks.size(0) != k.size(0) || ks.scalar_type() != k.scalar_type()) {
    if (length_ > 0)
      throw std::invalid_argument("the batch size changed while the KV cache held positions");
    ks = torch::empty({k.size(0), k.size(1), 2 * capacity_, k.size(3)}, k.options());
    vs = torch::empty({v.size(0), v.size(1), 2 * capacity_, v.size(3)}, v.options());
  }
  ks.narrow(2, offset_ + length_, T).copy_(k);
  vs.narrow(2, offset_ + length_, T).copy_(v);
  return {ks.narrow(2, offset_, length_ + T), vs.narrow(2, offset_, length_ + T)};
}

}  // namespace tinylm
