#include "model/kernels/rms_norm.h"

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cmath>
#include <type_traits>
#include <vector>

#include "model/kernels/element_io.h"
#include "model/kernels/kernel_choice.h"
#include "model/kernels/row_chunks.h"

namespace tinylm {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

// Rows [begin, end) of x (N, C): y (T, or bfloat16 rounded once: element_io.h) and r. Cloned
// per instruction set, picked at run time.
template <class T, class Out>
TINYLM_CPU_CLONES void rms_norm_rows(const T* x, const T* w, Out* y, T* r, int64_t C, double eps,
                                     int64_t begin, int64_t end) {
  for (int64_t n = begin; n < end; ++n) {
    const T* xr = x + n * C;
    Out* yr = y + n * C;
    T ss = 0;
#pragma omp simd reduction(+ : ss)
    for (int64_t c = 0; c < C; ++c) ss += xr[c] * xr[c];
    const T rn = static_cast<T>(1.0 / std::sqrt(static_cast<double>(ss) / C + eps));
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) store(yr[c], xr[c] * rn * w[c]);
    r[n] = rn;
  }
}

// Rows [begin, end): dx, and their share of dw added into dw_part. g is y's gradient, in y's
// type.
template <class T, class G>
TINYLM_CPU_CLONES void rms_norm_backward_rows(const G* g, const T* x, const T* w, const T* r, T* dx,
                                              T* dw_part, int64_t C, int64_t begin, int64_t end) {
  for (int64_t n = begin; n < end; ++n) {
    const G* gr = g + n * C;
    const T* xr = x + n * C;
    T* dxr = dx + n * C;
    const T rn = r[n];
    T dot = 0;  // sum over c of (g w)_c x_c
#pragma omp simd reduction(+ : dot)
    for (int64_t c = 0; c < C; ++c) dot += widen(gr[c]) * w[c] * xr[c];
    const T k = rn * rn * rn * dot / static_cast<T>(C);
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) {
      const T gc = widen(gr[c]);
      dxr[c] = rn * gc * w[c] - xr[c] * k;
      dw_part[c] += gc * xr[c] * rn;
    }
  }
}

class RmsNorm : public torch::autograd::Function<RmsNorm> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x_in, const at::Tensor& weight,
                            double eps, bool bfloat16_out) {
    const at::Tensor x = x_in.contiguous();
    const at::Tensor w = weight.to(x.scalar_type()).contiguous();
    const int64_t C = x.size(-1), N = x.numel() / C;
    const bool narrow = bfloat16_out && x.scalar_type() == at::kFloat;
    at::Tensor y = at::empty_like(x, narrow ? at::kBFloat16 : x.scalar_type());
    at::Tensor r = at::empty({N}, x.options());  // (N,)
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "fused_rms_norm", [&] {
      const scalar_t *xp = x.data_ptr<scalar_t>(), *wp = w.data_ptr<scalar_t>();
      scalar_t* rp = r.data_ptr<scalar_t>();
      const auto rows = [&](auto* yp) {
        at::parallel_for(0, N, kRowGrain, [&](int64_t begin, int64_t end) {
          rms_norm_rows(xp, wp, yp, rp, C, eps, begin, end);
        });
      };
      if constexpr (std::is_same_v<scalar_t, float>) {
        if (narrow) return rows(y.data_ptr<c10::BFloat16>());
      }
      rows(y.data_ptr<scalar_t>());
    });
    ctx->save_for_backward({x, w, r});
    ctx->saved_data["weight_dtype"] = weight.scalar_type();
    return y;
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &w = saved[1], &r = saved[2];
    // A bfloat16 gradient (of a bfloat16 y) is read as it is, widened exactly.
    const bool narrow = grads[0].scalar_type() == at::kBFloat16 && x.scalar_type() == at::kFloat;
    const at::Tensor g = (narrow ? grads[0] : grads[0].to(x.scalar_type())).contiguous();
    const int64_t C = x.size(-1), N = x.numel() / C;
    at::Tensor dx = at::empty_like(x);
    // dw sums over rows: each chunk of rows its own partial sum, added in chunk order, so
    // the result does not depend on which thread ran which chunk.
    const RowChunks chunks(N);
    at::Tensor dw_parts = at::zeros({chunks.count, C}, x.options());
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "fused_rms_norm_backward", [&] {
      const scalar_t *xp = x.data_ptr<scalar_t>(), *wp = w.data_ptr<scalar_t>(),
                     *rp = r.data_ptr<scalar_t>();
      scalar_t *dxp = dx.data_ptr<scalar_t>(), *partp = dw_parts.data_ptr<scalar_t>();
      const auto chunked = [&](const auto* gp) {
        at::parallel_for(0, chunks.count, 1, [&](int64_t first, int64_t last) {
          for (int64_t i = first; i < last; ++i) {
            rms_norm_backward_rows(gp, xp, wp, rp, dxp, partp + i * C, C, chunks.begin(i),
                                   chunks.end(i));
          }
        });
      };
      if constexpr (std::is_same_v<scalar_t, float>) {
        if (narrow) return chunked(g.data_ptr<c10::BFloat16>());
      }
      chunked(g.data_ptr<scalar_t>());
    });
    return {dx, dw_parts.sum(0).to(ctx->saved_data["weight_dtype"].toScalarType()), at::Tensor(),
            at::Tensor()};
  }
};

}  // namespace

at::Tensor fused_rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps,
                          bool bfloat16_out) {
  TORCH_CHECK(x.size(-1) == weight.size(0), "fused_rms_norm: x's last dimension ", x.size(-1),
              " is not the weight's ", weight.size(0));
  return RmsNorm::apply(fused_kernel_input(x), weight, eps, bfloat16_out);
}

}  // namespace tinylm
