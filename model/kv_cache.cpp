#include "model/kv_cache.h"

#include <stdexcept>
#include <string>

namespace tinylm {

void KVCache::make_room(int64_t n) {
  if (n > capacity_) {
    throw std::invalid_argument(std::to_string(n) + " positions do not fit a KV cache of " +
                                std::to_string(capacity_) + " (block_size)");
  }
  const int64_t drop = length_ + n - capacity_;
  if (drop <= 0) return;
  const int64_t keep = length_ - drop;
  for (auto* stores : {&k_, &v_}) {
    for (torch::Tensor& t : *stores) {
      if (!t.defined()) continue;
      // The ranges overlap: copy out first.
      t.narrow(2, 0, keep).copy_(t.narrow(2, drop, keep).clone());
    }
  }
  length_ = keep;
  dropped_ += drop;
}

std::pair<torch::Tensor, torch::Tensor> KVCache::append(size_t layer, const torch::Tensor& k,
                                                        const torch::Tensor& v) {
  const int64_t T = k.size(2);
  if (length_ + T > capacity_) {
    throw std::invalid_argument("KV cache of " + std::to_string(capacity_) + " positions holds " +
                                std::to_string(length_) + "; " + std::to_string(T) +
                                " more do not fit");
  }
  torch::Tensor& ks = k_.at(layer);
  torch::Tensor& vs = v_.at(layer);
  if (!ks.defined() || ks.size(0) != k.size(0) || ks.scalar_type() != k.scalar_type()) {
    if (length_ > 0) throw std::invalid_argument("the batch size changed while the KV cache held positions");
    ks = torch::empty({k.size(0), k.size(1), capacity_, k.size(3)}, k.options());
    vs = torch::empty({v.size(0), v.size(1), capacity_, v.size(3)}, v.options());
  }
  ks.narrow(2, length_, T).copy_(k);
  vs.narrow(2, length_, T).copy_(v);
  return {ks.narrow(2, 0, length_ + T), vs.narrow(2, 0, length_ + T)};
}

}  // namespace tinylm
