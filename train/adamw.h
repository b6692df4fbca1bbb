#pragma once
// AdamW over all of a model's parameters at once. The parameters, their gradients and both
// moments live in four flat buffers, each parameter and gradient a view into them, so a step
// is one fused pass over the buffers (split over the threads) instead of a dozen operators
// per parameter, zeroing the gradients is one fill and clipping is one norm. Matrices and
// embeddings (dim >= 2; T5's bias table aside) come first in the buffers and alone get
// weight decay, as in nanoGPT.
// The update is PyTorch's AdamW:
//   p -= lr * wd * p;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;
//   p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
// The buffers live on the parameters' device: on the CPU the pass is one loop, elsewhere the
// same update in a few whole-buffer operators (a test holds the two equal).
// The gradient buffer has kSideSlots more elements after the gradients, so that data-parallel
// ranks sum their gradients and a few scalars (the loss, a stop request) in one all-reduce.
//
// With train.optimizer = "muon" the blocks' 2-D matrices (transformer.h.*.weight, dim 2)
// come first in the buffers, ordered by shape, and take Muon's update instead (train/muon.h),
// one batch per shape, their momentum in exp_avg's place; AdamW updates the rest. Weight
// decay is the same for both: p *= 1 - lr wd with AdamW's scheduled rate, on every
// parameter of dim >= 2.

#include <cstdint>
#include <map>
#include <string>

#include <torch/torch.h>

#include "model/gpt.h"
#include "train/run/run_config.h"
#include "train/run/safetensors.h"

namespace tinylm {

class AdamW {
 public:
  // Moves `model`'s parameters into the flat buffer (values unchanged) and gives each a
  // zero gradient there; autograd then accumulates into it in place.
  AdamW(GPT& model, const TrainConfig& config);

  static constexpr int64_t kSideSlots = 2;

  void zero_grad() { sync_buffer_.zero_(); }
  // The gradients (N,) followed by kSideSlots free slots: (N + kSideSlots,).
  torch::Tensor& sync_buffer() { return sync_buffer_; }
  // Scales the gradients so that their global L2 norm is at most max_norm (> 0; infinity
  // for none); returns the norm before.
  double clip_grad_norm(double max_norm);
  void step(double lr);
  // The same update in whole-buffer LibTorch operators, for devices other than the CPU.
  void step_with_operators(double lr);
  int64_t steps() const { return steps_; }

  // "exp_avg.NAME" and "exp_avg_sq.NAME" for every AdamW parameter, "muon_momentum.NAME"
  // for every Muon matrix (views), for checkpoints.
  NamedTensors moments() const;
  // Parameters Muon updates (0 with AdamW alone).
  int64_t muon_matrices() const;
  // The FLOPs of a step's Newton-Schulz iterations over those matrices (newton_schulz_flops).
  double newton_schulz_flops() const;
  // Restores moments saved by moments() after `steps` steps; throws naming `source` and the
  // parameter when one is missing or misshapen.
  void restore(const std::map<std::string, torch::Tensor>& moments, int64_t steps,
               const std::string& source);

 private:
  struct Slot {
    std::string name;
    int64_t offset, numel;
    std::vector<int64_t> shape;
    bool muon = false;
  };
  // Muon's matrices of one shape, side by side in the buffers: (count, rows, cols).
  struct MuonBatch {
    int64_t offset, count;
    std::vector<int64_t> shape;
  };
  void muon_step(double lr);
  std::vector<Slot> slots_;
  std::vector<MuonBatch> muon_batches_;
  torch::Tensor params_, grads_, exp_avg_, exp_avg_sq_;  // (N,) float32 each
  torch::Tensor sync_buffer_;  // (N + kSideSlots,): grads_ is its first N elements
  int64_t decayed_ = 0;        // the first decayed_ elements get weight decay
  int64_t muon_end_ = 0;       // the first muon_end_ elements are Muon's; AdamW's start there
  double beta1_, beta2_, eps_ = 1e-8, weight_decay_;
  double muon_lr_scale_;  // muon_learning_rate / learning_rate
  double muon_momentum_;
  torch::ScalarType muon_dtype_;  // of Newton-Schulz: bfloat16 where the matmuls autocast to it
  int64_t steps_ = 0;
};

}  // namespace tinylm
