#include "model/ops/blas_matmul.h"

#include <algorithm>
#include <climits>

#include "model/ops/blas.h"

namespace tinylm {
namespace {

bool fits_int(int64_t v) { return v >= 0 && v <= INT_MAX; }

std::optional<BlasLayout> layout_of(const torch::Tensor& t) {
  return blas_layout(t.size(0), t.size(1), t.stride(0), t.stride(1));
}

}  // namespace

void blas_matmul(const torch::Tensor& a_in, const torch::Tensor& b_in, const torch::Tensor& bias,
                 torch::Tensor& out, float alpha, float beta) {
  TORCH_CHECK(a_in.dim() == 2 && b_in.dim() == 2 && out.dim() == 2,
              "blas_matmul: expected matrices, got ", a_in.sizes(), " x ", b_in.sizes(), " -> ",
              out.sizes());
  TORCH_CHECK(a_in.scalar_type() == torch::kFloat32 && b_in.scalar_type() == torch::kFloat32 &&
                  out.scalar_type() == torch::kFloat32,
              "blas_matmul: float32 operands only");
  TORCH_CHECK(a_in.is_cpu() && b_in.is_cpu() && out.is_cpu(), "blas_matmul: CPU tensors only");
  const int64_t m = a_in.size(0), k = a_in.size(1), n = b_in.size(1);
  TORCH_CHECK(b_in.size(0) == k && out.size(0) == m && out.size(1) == n, "blas_matmul: shapes ",
              a_in.sizes(), " x ", b_in.sizes(), " -> ", out.sizes());
  TORCH_CHECK(out.is_contiguous(), "blas_matmul: out must be contiguous");
  TORCH_CHECK(fits_int(m) && fits_int(n) && fits_int(k), "blas_matmul: sides past int's range");
  const bool has_bias = bias.defined();
  TORCH_CHECK(!has_bias || (bias.scalar_type() == torch::kFloat32 && bias.is_contiguous() &&
                            bias.dim() == 1 && bias.numel() == n),
              "blas_matmul: bias must be a contiguous float32 vector of ", n);
  if (out.numel() == 0) return;
  float* c = out.data_ptr<float>();
  if (has_bias) {  // out = alpha bias + beta out, row by row; then the products add to it
    const float* v = bias.data_ptr<float>();
    for (int64_t i = 0; i < m; ++i) {
      float* row = c + i * n;
      if (beta == 0.0f) {
        for (int64_t j = 0; j < n; ++j) row[j] = alpha * v[j];
      } else {
        for (int64_t j = 0; j < n; ++j) row[j] = alpha * v[j] + beta * row[j];
      }
    }
    beta = 1.0f;
  }
  // An operand in neither layout is copied into one (the callers' never are).
  const torch::Tensor a = layout_of(a_in) ? a_in : a_in.contiguous();
  const torch::Tensor b = layout_of(b_in) ? b_in : b_in.contiguous();
  const BlasLayout la = *layout_of(a), lb = *layout_of(b);
  gemm_row_major<float>(la.transposed, lb.transposed, static_cast<int>(m), static_cast<int>(n),
                        static_cast<int>(k), alpha, a.data_ptr<float>(), la.ld, b.data_ptr<float>(),
                        lb.ld, beta, c, static_cast<int>(std::max<int64_t>(n, 1)));
}

}  // namespace tinylm
