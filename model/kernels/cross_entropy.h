#pragma once
// The mean next-token loss in one pass forward and one backward:
//   loss = mean over rows n of (lse_n - z_n[t_n]),  lse_n = log sum_v exp(z_n[v])
//   dz_n = (softmax(z_n) - onehot(t_n)) g / N
// LibTorch's cross_entropy takes log_softmax, nll_loss, their two backward nodes, and under
// autocast a cast each way: a few microseconds of work at a small vocabulary, behind six
// operators' fixed costs. Saves only lse (one float a row) for the backward, which recomputes
// the softmax from the logits.

#include <ATen/ATen.h>

namespace tinylm {

// logits (N, V) float32, float64 or bfloat16 (computed in float32) on the CPU, targets (N,)
// int64 in [0, V) -> the mean loss, a scalar: float32 for bfloat16 logits (as autocast's
// cross_entropy gives it), else the logits' type. The logits' gradient is in their type,
// a bfloat16 one the float32 gradient rounded once.
at::Tensor fused_cross_entropy(const at::Tensor& logits, const at::Tensor& targets);

}  // namespace tinylm
