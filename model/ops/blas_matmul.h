#pragma once
// float32 matrix products through the BLAS LibTorch links (OpenBLAS here) with
// onednn_matmul's contract (model/ops/onednn_matmul.h), for the fused linear
// (model/fused_linear.h) on CPUs where oneDNN's float32 kernel does not beat the BLAS: the
// same sgemm LibTorch's mm calls, without LibTorch's wrapping, and adding into a gradient in
// place (beta = 1) where LibTorch makes a new tensor that autograd then adds.

#include <torch/torch.h>

namespace tinylm {

// out = alpha a b [+ alpha bias] + beta out for float32 matrices a (M, K) and b (K, N), each
// with rows or columns contiguous (a transpose is a view), bias a contiguous float32 vector
// (N) or undefined, out contiguous float32 (M, N). beta == 0 never reads out. Each element is
// one float32 sum, as sgemm makes it; the bias and beta out are added before the products.
void blas_matmul(const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& bias,
                 torch::Tensor& out, float alpha = 1.0f, float beta = 0.0f);

}  // namespace tinylm
