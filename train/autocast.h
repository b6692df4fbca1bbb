#pragma once
// LibTorch's bfloat16 autocast for a scope, on the model's device: matmuls and linears in
// bfloat16, reductions and the loss in float32; weights, gradients and the optimizer stay
// float32. Training steps and the training's loss estimate run under it when train.dtype
// chooses bfloat16, as nanoGPT's do under its autocast context.

#include <torch/torch.h>

#include "model/autocast_state.h"  // TINYLM_AUTOCAST_BY_DEVICE

namespace tinylm {

// Off when `on` is false: then the scope runs in float32.
class Autocast {
 public:
  Autocast(bool on, const torch::Device& device) : on_(on), cuda_(device.is_cuda()) { set(on_); }
  ~Autocast() {
    if (!on_) return;
    set(false);
    at::autocast::clear_cache();
  }
  Autocast(const Autocast&) = delete;
  Autocast& operator=(const Autocast&) = delete;

 private:
  void set(bool enabled) const {
    if (!on_) return;
#ifdef TINYLM_AUTOCAST_BY_DEVICE
    const auto type = cuda_ ? at::kCUDA : at::kCPU;
    at::autocast::set_autocast_dtype(type, at::kBFloat16);
    at::autocast::set_autocast_enabled(type, enabled);
#else
    if (cuda_) {
      at::autocast::set_autocast_gpu_dtype(at::kBFloat16);
      at::autocast::set_enabled(enabled);
    } else {
      at::autocast::set_autocast_cpu_dtype(at::kBFloat16);
      at::autocast::set_cpu_enabled(enabled);
    }
#endif
  }
  bool on_, cuda_;
};

}  // namespace tinylm
