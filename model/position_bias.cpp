#include "model/position_bias.h"

#include <algorithm>
#include <cmath>

namespace tinylm {

std::vector<double> alibi_slopes(int64_t n_head) {
  const auto powers_of_two = [](int64_t n) {  // 2^(-8 h / n), h = 1 .. n
    std::vector<double> s;
    for (int64_t h = 1; h <= n; ++h) s.push_back(std::exp2(-8.0 * h / static_cast<double>(n)));
    return s;
  };
  int64_t below = 1;
  while (below * 2 <= n_head) below *= 2;
  std::vector<double> slopes = powers_of_two(below);
  const std::vector<double> finer = powers_of_two(2 * below);
  for (size_t i = 0; static_cast<int64_t>(slopes.size()) < n_head; i += 2) {
    slopes.push_back(finer[i]);
  }
  return slopes;
}

int64_t relative_bucket(int64_t distance, int64_t num_buckets, int64_t max_distance) {
  const int64_t exact = num_buckets / 2;
  const int64_t d = std::max<int64_t>(distance, 0);
  if (d < exact) return d;
  const double scaled = std::log(static_cast<double>(d) / static_cast<double>(exact)) /
                        std::log(static_cast<double>(max_distance) / static_cast<double>(exact)) *
                        static_cast<double>(num_buckets - exact);
  return std::min(num_buckets - 1, exact + static_cast<int64_t>(scaled));
}

torch::Tensor query_key_distances(int64_t T, int64_t Tk, torch::Device device) {
  const auto options = torch::TensorOptions().dtype(torch::kInt64).device(device);
  const torch::Tensor i = torch::arange(Tk - T, Tk, options).unsqueeze(1);  // (T, 1)
  const torch::Tensor j = torch::arange(Tk, options).unsqueeze(0);          // (1, Tk)
  return (i - j).clamp_min(0);                                              // (T, Tk)
}

RelativeBiasImpl::RelativeBiasImpl(int64_t n_head, int64_t buckets, int64_t distance)
    : num_buckets(buckets), max_distance(distance) {
  weight = register_parameter("weight", torch::zeros({n_head, num_buckets}));
}

torch::Tensor RelativeBiasImpl::buckets(int64_t count) const {
  torch::Tensor out = torch::empty({count}, torch::kInt64);
  int64_t* b = out.data_ptr<int64_t>();
  for (int64_t d = 0; d < count; ++d) b[d] = relative_bucket(d, num_buckets, max_distance);
  return out;
}

torch::Tensor RelativeBiasImpl::forward(int64_t T, int64_t Tk) const {
  torch::Tensor cached;
  {
    // Threads may share one model (the lab): the cache is swapped whole, under the lock.
    const std::lock_guard<std::mutex> lock(cache_mutex_);
    if (!cached_buckets_.defined() || cached_buckets_.size(0) < Tk ||
        cached_buckets_.device() != weight.device()) {
      cached_buckets_ = buckets(Tk).to(weight.device());
    }
    cached = cached_buckets_;
  }
  // Each distance's bias (nh, Tk), then spread over the (T, Tk) grid of distances.
  const torch::Tensor per_distance = weight.index_select(1, cached.slice(0, 0, Tk));
  const torch::Tensor d = query_key_distances(T, Tk, weight.device());
  return per_distance.index_select(1, d.flatten()).view({weight.size(0), T, Tk});
}

}  // namespace tinylm
