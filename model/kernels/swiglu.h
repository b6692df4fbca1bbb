#pragma once
// SwiGLU's activation in one pass forward and one backward (model/block.h has the block):
//   y = silu(gate) * up,  [gate; up] = the two halves of c_fc's output along the last axis
//   d up = g silu(gate),  d gate = g up s (1 + gate (1 - s)),  s = sigmoid(gate)
// The gradient is written into one (..., 2H) tensor: the operator path's chunk backward
// joins the two halves with a cat, a pass this kernel does not need.

#include <ATen/ATen.h>

namespace tinylm {

// gate_up (..., 2H) float32, float64 or bfloat16 on the CPU -> (..., H) of the same type.
// bfloat16 is computed in float32 and rounded once, to what casting gate_up to float32 and the
// result back would give (element_io.h): autocast's next matmul takes it as it is.
at::Tensor fused_swiglu(const at::Tensor& gate_up);

}  // namespace tinylm
