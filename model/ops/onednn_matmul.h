#pragma once
// bfloat16 and float32 matrix products through oneDNN's own API, each shape's primitive made once
// per thread and kept. LibTorch 1.13 reaches the same oneDNN kernels through ideep, but wraps every
// call in tensor and descriptor bookkeeping: 9-19 us a call beyond the arithmetic at the default
// model's shapes (docs/MEASUREMENTS.md), more than the product itself for the smaller ones, and a
// training step makes dozens of them per thread. Built only where libdnnl-dev was found
// (TINYLM_WITH_ONEDNN); the callers keep LibTorch's path otherwise.

#include <torch/torch.h>

namespace tinylm {

// Whether this build has oneDNN's API.
bool onednn_matmul_built();

// Whether oneDNN runs bfloat16 products on this CPU, with a kernel of its own rather than a
// reference loop. oneDNN 2.6 has them from AVX-512 (avx512_core) on, and none at all on an
// AVX2-only CPU. The fused bfloat16 linear (model/fused_linear.h) asks this. Asked once.
bool onednn_bfloat16_runs();

// Whether oneDNN's float32 product on this CPU is one of its AVX-512 kernels (brgemm). The
// model's float32 products at its default shapes, one thread: 2x OpenBLAS's with the Haswell
// kernels that OPENBLAS_CORETYPE=Haswell picks, 1.1x its AVX-512 kernels (OpenBLAS also pays
// LibTorch's wrapping). On an AVX2-only CPU oneDNN's float32 kernel (gemm:jit) ran at
// OpenBLAS's speed (docs/MEASUREMENTS.md, round thirteen), so the float32 linear
// (model/fused_linear.h) takes the BLAS's products there. It asks this. Asked once.
bool onednn_float32_beats_blas();

// out = alpha a b [+ alpha bias] + beta out, for matrices a (M, K), b (K, N), out (M, N), or
// batches of them (count, M, K) and so on: a and b both bfloat16 or both float32, of any
// strides (a transpose is a view), bias a float32 vector (N) or undefined, out contiguous
// bfloat16 or float32 (float32 for float32 products). The products sum in float32; out is
// rounded once. Runs on the calling thread's OpenMP team (one thread inside a replica's
// region).
void onednn_matmul(const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& bias,
                   torch::Tensor& out, float alpha = 1.0f, float beta = 0.0f);

}  // namespace tinylm
