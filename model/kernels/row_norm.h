#pragma once
// RMSNorm and LayerNorm in one pass forward and one backward (model/norm.h has the module),
// each row of C normalised on its own:
//   RMSNorm    y = x r w,  r = 1 / sqrt(mean(x^2) + eps)
//              dx = r (g w) - x r^3 mean((g w) x),  dw = sum over rows of g x r
//   LayerNorm  y = xh w + b,  xh = (x - mean(x)) r,  r = 1 / sqrt(mean((x - mean(x))^2) + eps)
//              dx = r ((g w) - mean(g w) - xh mean((g w) xh)),  dw = sum of g xh,  db = sum of g
// Saves x and one or two floats per row (r; LayerNorm's mean too) for the backward. Equal to
// the operator path (RMSNorm's operators, LibTorch's layer_norm) within float rounding
// (tests/unit).

#include <ATen/ATen.h>

namespace tinylm {

// x (..., C) float32, float64 or bfloat16 (computed in float32) on the CPU, weight (C,) -> (...,
// C) in x's type; with `bfloat16_out` and x float32, in bfloat16 (rounded once, as a cast:
// for a linear under bfloat16 autocast, which would cast it), its gradient read in bfloat16.
at::Tensor fused_rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps,
                          bool bfloat16_out = false);

// The same for LayerNorm; `bias` (C,), or undefined for none.
at::Tensor fused_layer_norm(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                            double eps, bool bfloat16_out = false);

}  // namespace tinylm
