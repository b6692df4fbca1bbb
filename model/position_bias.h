#pragma once
// Positions as a bias on the attention scores: one number per head per distance d = i - j
// between query i and key j <= i, added to Q K^T / sqrt(d_k) before the softmax. Nothing
// enters the residual stream, so a window slides and grows past block_size freely.
//   alibi     b_h(d) = -m_h d, fixed, with ALiBi's geometric slopes (Press et al. 2022): for
//             n heads, n a power of two, m_h = 2^(-8 h / n), h = 1 .. n; otherwise the slopes
//             of the largest power of two n' < n, then every other slope of 2 n' until
//             there are n.
//   relative  T5's bias, learned: b_h(d) = W[h, bucket(d)], W (nh, num_buckets) per layer
//             (transformer.h.{i}.attn.rel_bias.weight; T5 shares one table across layers,
//             tinylm gives each layer its own, so that each layer's heads can be read
//             alone). Buckets 0 .. num_buckets / 2 - 1 hold d exactly; the other half is
//             log-spaced from there to max_distance, and every d >= max_distance shares the
//             last bucket.

#include <cstdint>
#include <mutex>
#include <vector>

#include <torch/torch.h>

#include "model/config.h"

namespace tinylm {

std::vector<double> alibi_slopes(int64_t n_head);

// T5's causal bucket of a distance d >= 0.
int64_t relative_bucket(int64_t distance, int64_t num_buckets, int64_t max_distance);

// The distance i - j of every query (the last T positions of Tk) to every key, clamped at
// 0 above the diagonal, where the causal mask hides it anyway: (T, Tk) int64 on `device`.
torch::Tensor query_key_distances(int64_t T, int64_t Tk, torch::Device device = torch::kCPU);

// The learned table of T5's bias; a module so that its name is rel_bias.weight.
class RelativeBiasImpl : public torch::nn::Module {
 public:
  RelativeBiasImpl(int64_t n_head, int64_t num_buckets, int64_t max_distance);
  // (nh, T, Tk) for queries at the last T of Tk positions.
  torch::Tensor forward(int64_t T, int64_t Tk) const;
  // Bucket of each distance 0 .. count - 1: (count,) int64.
  torch::Tensor buckets(int64_t count) const;

  torch::Tensor weight;  // (nh, num_buckets)
  int64_t num_buckets, max_distance;

 private:
  // buckets() of the longest window seen, on the weight's device: a forward pass reads a
  // slice of it instead of computing and copying the buckets again in every layer and step.
  mutable torch::Tensor cached_buckets_;
  mutable std::mutex cache_mutex_;
};
TORCH_MODULE(RelativeBias);

}  // namespace tinylm
