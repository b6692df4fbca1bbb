#pragma once
// RMSNorm in one pass forward and one backward (model/norm.h has the formula):
//   y = x r w,  r = 1 / sqrt(mean(x^2) + eps)            per row of C
//   dx = r (g w) - x r^3 mean((g w) x),  dw = sum over rows of g x r
// Saves only x and r (one float per row) for the backward. Equal to the operator path
// x * rsqrt(x.square().mean(-1, true) + eps) * w within float rounding (tests/unit).

#include <ATen/ATen.h>

namespace tinylm {

// x (..., C) float32, float64 or bfloat16 (computed in float32) on the CPU, weight (C,) -> (...,
// C) in x's type; with `bfloat16_out` and x float32, in bfloat16 (rounded once, as a cast:
// for a linear under bfloat16 autocast, which would cast it), its gradient read in bfloat16.
at::Tensor fused_rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps,
                          bool bfloat16_out = false);

}  // namespace tinylm
