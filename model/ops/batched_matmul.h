#pragma once
// A batched matrix product for the many small matrices of attention, (..., n, k) @ (..., k, m).
// Why not torch::matmul: LibTorch 1.13 without MKL (Debian's build) runs bmm as a serial loop
// over the batch, selecting each matrix and making one BLAS call that spreads a 64 x 64
// product over all threads. This spreads the batch over the threads instead, one
// single-threaded GEMM per matrix, with no per-matrix tensor bookkeeping: faster on one
// layer's attention forward and backward (docs/MEASUREMENTS.md). Results equal
// torch::matmul's to float rounding, which a test holds. Differentiable: the backward is two
// more such products. Not for large matrices, which LibTorch's own threading serves well.

#include <torch/torch.h>

namespace tinylm {

torch::Tensor batched_matmul(const torch::Tensor& a, const torch::Tensor& b);

}  // namespace tinylm
