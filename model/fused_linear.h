#pragma once
// y = x W^T + b as one autograd node on the CPU, in bfloat16 or in float32, its products
// straight to a library: oneDNN's own API (model/ops/onednn_matmul.h) or the BLAS's
// (model/ops/blas_matmul.h).
//
// bfloat16: under LibTorch's bfloat16 autocast a linear is four nodes: the casts of x and W
// to bfloat16, addmm, and on the way back the cast of W's bfloat16 gradient to float32, each
// a dispatch, an allocation and a pass. Here the forward casts W (and x, when it comes in
// float32), makes the one product with the bias added in its pass, and the backward makes
// two: dx in bfloat16, as autocast's, and dW summed in float32 and written in float32, one
// rounding where autocast's took two (bfloat16, then the cast). oneDNN's products.
//
// float32: the same node on float32 operands, with oneDNN's products where its float32 kernel
// beats the BLAS (onednn_float32_beats_blas: AVX-512 CPUs), and the BLAS's elsewhere (the
// sgemm LibTorch's own linear calls). Either way dW is added into the weight's gradient in
// place, by whichever thread is free (model/weight_grad_queue.h), where LibTorch's makes a new
// tensor that autograd then adds.
//
// The bias's gradient is a float32 sum of dy's rows. Values: the same products as
// LibTorch's to float32 rounding (and bfloat16's), which tests/unit/test_fused_linear.cpp
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
// CPU, x more than one row (one row is a matrix-vector product, LibTorch's mv).
bool float32_linear_takes(const torch::Tensor& x, const torch::Tensor& weight);

// The library of the float32 linear's products, and the one this CPU runs faster: oneDNN
// where its float32 kernel is an AVX-512 one (onednn_float32_beats_blas), else the BLAS.
enum class Float32Products { kOnednn, kBlas };
Float32Products float32_products();

// x (..., in), weight (out, in), bias (out) or undefined, all float32 -> (..., out) float32.
// Differentiable in all three. `products`: kOnednn needs oneDNN's API in the build
// (onednn_matmul_built), and runs on every CPU.
torch::Tensor float32_linear(const torch::Tensor& x, const torch::Tensor& weight,
                             const torch::Tensor& bias,
                             Float32Products products = float32_products());

}  // namespace tinylm
