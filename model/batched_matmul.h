#pragma once
// A batched matrix product for the many small matrices of attention, (..., n, k) @ (..., k, m).
// Why not torch::matmul: LibTorch 1.13 without MKL (Debian's build) runs bmm as a serial loop
// of BLAS calls, each spreading a 64 x 64 product over all threads; measured here, that is
// 1.6 ms for one (48, 64, 32) x (48, 32, 64) product, most of a step's attention time. This
// spreads the batch over the threads instead, one single-threaded GEMM per matrix (0.3 ms for
// the same product); results equal torch::matmul's to float rounding, which a test holds.
// Differentiable: the backward is two more such products.

#include <torch/torch.h>

namespace tinylm {

torch::Tensor batched_matmul(const torch::Tensor& a, const torch::Tensor& b);

}  // namespace tinylm
