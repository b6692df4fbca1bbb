#pragma once
// Which path the model's forward and backward take where a fused CPU kernel exists
// (model/kernels/): the kernel, one pass over memory forward and one backward, or the
// explicit LibTorch operators, whose every intermediate a hook can read. The kernels are
// the default; the operators stay the reference the kernels are tested against, the path
// any hook point inside a fused region forces, and the other side of `tinylm bench`'s A/B.

#include <ATen/ATen.h>

namespace tinylm {

enum class Kernels { kFused, kOperators };

Kernels kernel_choice();  // process-wide; kFused until set
void set_kernel_choice(Kernels choice);

// Sets the choice for one scope and restores the one it found.
class ScopedKernelChoice {
 public:
  explicit ScopedKernelChoice(Kernels choice) : previous_(kernel_choice()) {
    set_kernel_choice(choice);
  }
  ~ScopedKernelChoice() { set_kernel_choice(previous_); }
  ScopedKernelChoice(const ScopedKernelChoice&) = delete;
  ScopedKernelChoice& operator=(const ScopedKernelChoice&) = delete;

 private:
  Kernels previous_;
};

// Whether a fused kernel may take x: kernels chosen, x on the CPU in float32, float64 (for
// finite-difference checks) or bfloat16 (autocast's; the kernel computes it in float32).
inline bool fused_kernel_takes(const at::Tensor& x) {
  const auto type = x.scalar_type();
  return kernel_choice() == Kernels::kFused && x.device().is_cpu() &&
         (type == at::kFloat || type == at::kDouble || type == at::kBFloat16);
}

// x as a fused kernel computes it: bfloat16 widened to float32 (an operator, so the
// gradient narrows back), float32 and float64 as they are.
inline at::Tensor fused_kernel_input(const at::Tensor& x) {
  return x.scalar_type() == at::kBFloat16 ? x.to(at::kFloat) : x;
}

}  // namespace tinylm
