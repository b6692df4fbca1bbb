#include "model/ops/batched_matmul.h"

#include <ATen/record_function.h>

#include <ATen/Parallel.h>

#include "model/ops/blas.h"

namespace tinylm {
namespace {

// A row-major (N, r, c) float matrix stack as BLAS sees it: contiguous rows, or the
// transpose of contiguous rows (a .transpose(1, 2) view), with any batch stride.
struct Operand {
  torch::Tensor t;
  bool transposed;
  int ld;
};

Operand operand(const torch::Tensor& x) {
  if (const auto l = blas_layout(x.size(1), x.size(2), x.stride(1), x.stride(2)))
    return {x, l->transposed, l->ld};
  return {x.contiguous(), false, static_cast<int>(std::max<int64_t>(x.size(2), 1))};
}

// (N, n, k) @ (N, k, m) -> (N, n, m) float; no autograd.
torch::Tensor bmm_parallel(const torch::Tensor& a_in, const torch::Tensor& b_in) {
  if (a_in.scalar_type() != torch::kFloat32 || !a_in.device().is_cpu()) {
    return torch::bmm(a_in, b_in);  // other dtypes and devices: LibTorch's own path
  }
  const Operand a = operand(a_in), b = operand(b_in.to(torch::kFloat32));
  const int64_t N = a_in.size(0);
  const int n = static_cast<int>(a_in.size(1)), k = static_cast<int>(a_in.size(2)),
            m = static_cast<int>(b_in.size(2));
  torch::Tensor out = torch::empty({N, n, m}, a_in.options());  // (N, n, m)
  const float* a_data = a.t.data_ptr<float>();
  const float* b_data = b.t.data_ptr<float>();
  float* out_data = out.data_ptr<float>();
  const int64_t a_batch = a.t.stride(0), b_batch = b.t.stride(0);
  // Row-major C = A B is column-major C^T = B^T A^T: pass B first.
  const char trans_a = a.transposed ? 'T' : 'N', trans_b = b.transposed ? 'T' : 'N';
  const float one = 1.0f, zero = 0.0f;
  at::parallel_for(0, N, 1, [&](int64_t begin, int64_t end) {
    // Inside a parallel region OpenBLAS runs single-threaded.
    for (int64_t i = begin; i < end; ++i) {
      sgemm_(&trans_b, &trans_a, &m, &n, &k, &one, b_data + i * b_batch, &b.ld,
             a_data + i * a_batch, &a.ld, &zero, out_data + i * n * m, &m);
    }
  });
  return out;
}

class BatchedMatmul : public torch::autograd::Function<BatchedMatmul> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& a,
                               const torch::Tensor& b) {
    ctx->save_for_backward({a, b});
    return bmm_parallel(a, b);
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor& a = saved[0];
    const torch::Tensor& b = saved[1];
    const torch::Tensor g = grads[0].contiguous();  // (N, n, m)
    torch::Tensor grad_a, grad_b;
    if (ctx->needs_input_grad(0)) grad_a = bmm_parallel(g, b.transpose(1, 2));  // (N, n, k)
    if (ctx->needs_input_grad(1)) grad_b = bmm_parallel(a.transpose(1, 2), g);  // (N, k, m)
    return {grad_a, grad_b};
  }
};

}  // namespace

torch::Tensor batched_matmul(const torch::Tensor& a, const torch::Tensor& b) {
  RECORD_USER_SCOPE("tinylm::matmul");  // a profiler's category (train/step_profile.h)
  TORCH_CHECK(a.dim() >= 3 && a.dim() == b.dim(), "batched_matmul: expected equal ranks >= 3");
  std::vector<int64_t> batch(a.sizes().begin(), a.sizes().end() - 2);
  const torch::Tensor a3 = a.reshape({-1, a.size(-2), a.size(-1)});
  const torch::Tensor b3 = b.reshape({-1, b.size(-2), b.size(-1)});
  TORCH_CHECK(a3.size(0) == b3.size(0) && a3.size(2) == b3.size(1), "batched_matmul: shapes ",
              a.sizes(), " and ", b.sizes(), " do not multiply");
  torch::Tensor out = BatchedMatmul::apply(a3, b3);  // (N, n, m)
  batch.push_back(a.size(-2));
  batch.push_back(b.size(-1));
  return out.view(batch);
}

}  // namespace tinylm
