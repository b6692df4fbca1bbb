#pragma once
// y = x W^T + b as one autograd node with oneDNN's products (model/ops/onednn_matmul.h), in
// bfloat16 or in float32.
//
// bfloat16: under LibTorch's bfloat16 autocast a linear is four nodes: the casts of x and W
// to bfloat16, addmm, and on the way back the cast of W's bfloat16 gradient to float32, each
// a dispatch, an allocation and a pass. Here the forward casts W (and x, when it comes in
// float32), makes the one product with the bias added in its pass, and the backward makes
// two: dx in bfloat16, as autocast's, and dW summed in float32 and written in float32, one
// rounding where autocast's took two (bfloat16, then the cast).
//
// float32: the same node on float32 operands, where oneDNN's float32 kernel beats the BLAS
// LibTorch calls (onednn_float32_beats_blas: AVX-512 CPUs).
//
// The bias's gradient is a float32 sum of dy's rows. Values: the same products as
// LibTorch's to float32 rounding (and bfloat16's), which tests/unit/test_onednn_linear.cpp
// holds against float64.

#include <torch/torch.h>

namespace tinylm {

// Whether a linear of x with `weight` takes the bfloat16 path: CPU autocast to bfloat16 is
// on, the weight is a float32 CPU matrix, and oneDNN runs bfloat16 on this CPU
// (onednn_bfloat16_runs).
bool bfloat16_linear_takes(const torch::Tensor& x, const torch::Tensor& weight);

// x (..., in) float32 or bfloat16, weight (out, in) float32, bias (out) float32 or
// undefined -> (..., out) bfloat16. Differentiable in all three.
torch::Tensor bfloat16_linear(const torch::Tensor& x, const torch::Tensor& weight,
                              const torch::Tensor& bias);

// Whether it takes the float32 path: no bfloat16 autocast, x and the weight float32 on the
// CPU, x more than one row (one row is a matrix-vector product, LibTorch's mv), and oneDNN's
// float32 kernel beats the BLAS here (onednn_float32_beats_blas).
bool float32_linear_takes(const torch::Tensor& x, const torch::Tensor& weight);

// x (..., in), weight (out, in), bias (out) or undefined, all float32 -> (..., out) float32.
// Differentiable in all three. Runs wherever oneDNN's API was built, whatever it beats.
torch::Tensor float32_linear(const torch::Tensor& x, const torch::Tensor& weight,
                             const torch::Tensor& bias);

}  // namespace tinylm
