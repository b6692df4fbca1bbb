#pragma once
// What LibTorch's autocast is doing on this thread, across its API change in 2.4 (one call
// per device type replaced the per-device calls). train/autocast.h turns it on and off; a
// fused kernel whose output only a linear reads asks whether that linear would cast it.

#include <ATen/autocast_mode.h>
#include <torch/version.h>

#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
#define TINYLM_AUTOCAST_BY_DEVICE 1
#endif

namespace tinylm {

// Whether CPU autocast is on with bfloat16: a linear on the CPU then casts its input to it.
inline bool cpu_autocast_to_bfloat16() {
#ifdef TINYLM_AUTOCAST_BY_DEVICE
  return at::autocast::is_autocast_enabled(at::kCPU) &&
         at::autocast::get_autocast_dtype(at::kCPU) == at::kBFloat16;
#else
  return at::autocast::is_cpu_enabled() && at::autocast::get_autocast_cpu_dtype() == at::kBFloat16;
#endif
}

}  // namespace tinylm
