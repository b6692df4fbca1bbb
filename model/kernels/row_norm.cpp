#include "model/kernels/row_norm.h"

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

// RMSNorm's rows [begin, end) of x (N, C): y (T, or bfloat16 rounded once: element_io.h) and
// r. Cloned per instruction set, picked at run time.
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

// RMSNorm's rows [begin, end): dx, and their share of dw added into dw_part. g is y's
// gradient, in y's type.
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

// LayerNorm's rows [begin, end) of x (N, C): y (T, or bfloat16 rounded once), each row's mean
// and r. The variance from the centred values (two passes over the row, which is in L1).
template <class T, class Out>
TINYLM_CPU_CLONES void layer_norm_rows(const T* x, const T* w, const T* b, Out* y, T* mean, T* r,
                                       int64_t C, double eps, int64_t begin, int64_t end) {
  for (int64_t n = begin; n < end; ++n) {
    const T* xr = x + n * C;
    Out* yr = y + n * C;
    T sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int64_t c = 0; c < C; ++c) sum += xr[c];
    const T mu = sum / static_cast<T>(C);
    T ss = 0;
#pragma omp simd reduction(+ : ss)
    for (int64_t c = 0; c < C; ++c) ss += (xr[c] - mu) * (xr[c] - mu);
    const T rn = static_cast<T>(1.0 / std::sqrt(static_cast<double>(ss) / C + eps));
    if (b) {
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) store(yr[c], (xr[c] - mu) * rn * w[c] + b[c]);
    } else {
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) store(yr[c], (xr[c] - mu) * rn * w[c]);
    }
    mean[n] = mu;
    r[n] = rn;
  }
}

// LayerNorm's rows [begin, end): dx, and their shares of dw and db added into the parts.
template <class T, class G>
TINYLM_CPU_CLONES void layer_norm_backward_rows(const G* g, const T* x, const T* w, const T* mean,
                                                const T* r, T* dx, T* dw_part, T* db_part,
                                                int64_t C, int64_t begin, int64_t end) {
  for (int64_t n = begin; n < end; ++n) {
    const G* gr = g + n * C;
    const T* xr = x + n * C;
    T* dxr = dx + n * C;
    const T mu = mean[n], rn = r[n];
    T sum_gw = 0, sum_gw_xh = 0;  // sums over c of (g w)_c and of (g w)_c xh_c
#pragma omp simd reduction(+ : sum_gw, sum_gw_xh)
    for (int64_t c = 0; c < C; ++c) {
      const T gw = widen(gr[c]) * w[c];
      sum_gw += gw;
      sum_gw_xh += gw * (xr[c] - mu) * rn;
    }
    const T a = sum_gw / static_cast<T>(C), k = sum_gw_xh / static_cast<T>(C);
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) {
      const T gc = widen(gr[c]), xh = (xr[c] - mu) * rn;
      dxr[c] = rn * (gc * w[c] - a - xh * k);
      dw_part[c] += gc * xh;
      db_part[c] += gc;
    }
  }
}

// Both norms' autograd node: Centred, LayerNorm; otherwise RMSNorm. An absent bias is an empty
// optional: an undefined tensor cannot be an autograd input, and an empty one would be made
// on every call.
template <bool Centred>
class RowNorm : public torch::autograd::Function<RowNorm<Centred>> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x_in, const at::Tensor& weight,
                            const c10::optional<at::Tensor>& bias, double eps, bool bfloat16_out) {
    const at::Tensor x = x_in.contiguous();
    const at::Tensor w = weight.to(x.scalar_type()).contiguous();
    const bool has_bias = bias.has_value();
    const at::Tensor b = has_bias ? bias->to(x.scalar_type()).contiguous() : at::Tensor();
    const int64_t C = x.size(-1), N = x.numel() / C;
    const bool narrow = bfloat16_out && x.scalar_type() == at::kFloat;
    at::Tensor y = at::empty_like(x, narrow ? at::kBFloat16 : x.scalar_type());
    at::Tensor r = at::empty({N}, x.options());                              // (N,)
    at::Tensor mean = Centred ? at::empty({N}, x.options()) : at::Tensor();  // (N,)
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "fused_row_norm", [&] {
      const scalar_t *xp = x.data_ptr<scalar_t>(), *wp = w.data_ptr<scalar_t>();
      scalar_t* rp = r.data_ptr<scalar_t>();
      const auto rows = [&](auto* yp) {
        at::parallel_for(0, N, kRowGrain, [&](int64_t begin, int64_t end) {
          if constexpr (Centred) {
            layer_norm_rows(xp, wp, has_bias ? b.data_ptr<scalar_t>() : nullptr, yp,
                            mean.data_ptr<scalar_t>(), rp, C, eps, begin, end);
          } else {
            rms_norm_rows(xp, wp, yp, rp, C, eps, begin, end);
          }
        });
      };
      if constexpr (std::is_same_v<scalar_t, float>) {
        if (narrow) return rows(y.data_ptr<c10::BFloat16>());
      }
      rows(y.data_ptr<scalar_t>());
    });
    ctx->save_for_backward(Centred ? std::vector<at::Tensor>{x, w, r, mean}
                                   : std::vector<at::Tensor>{x, w, r});
    ctx->saved_data["weight_dtype"] = weight.scalar_type();
    ctx->saved_data["has_bias"] = has_bias;
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
    // dw and db sum over rows: each chunk of rows its own partial sums, added in chunk order,
    // so the result does not depend on which thread ran which chunk.
    const RowChunks chunks(N);
    at::Tensor dw_parts = at::zeros({chunks.count, C}, x.options());
    at::Tensor db_parts = Centred ? at::zeros({chunks.count, C}, x.options()) : at::Tensor();
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "fused_row_norm_backward", [&] {
      const scalar_t *xp = x.data_ptr<scalar_t>(), *wp = w.data_ptr<scalar_t>(),
                     *rp = r.data_ptr<scalar_t>();
      scalar_t *dxp = dx.data_ptr<scalar_t>(), *partp = dw_parts.data_ptr<scalar_t>();
      const auto chunked = [&](const auto* gp) {
        at::parallel_for(0, chunks.count, 1, [&](int64_t first, int64_t last) {
          for (int64_t i = first; i < last; ++i) {
            if constexpr (Centred) {
              layer_norm_backward_rows(gp, xp, wp, saved[3].data_ptr<scalar_t>(), rp, dxp,
                                       partp + i * C, db_parts.data_ptr<scalar_t>() + i * C, C,
                                       chunks.begin(i), chunks.end(i));
            } else {
              rms_norm_backward_rows(gp, xp, wp, rp, dxp, partp + i * C, C, chunks.begin(i),
                                     chunks.end(i));
            }
          }
        });
      };
      if constexpr (std::is_same_v<scalar_t, float>) {
        if (narrow) return chunked(g.data_ptr<c10::BFloat16>());
      }
      chunked(g.data_ptr<scalar_t>());
    });
    const auto weight_dtype = ctx->saved_data["weight_dtype"].toScalarType();
    const at::Tensor db = Centred && ctx->saved_data["has_bias"].toBool()
                              ? db_parts.sum(0).to(weight_dtype)
                              : at::Tensor();
    return {dx, dw_parts.sum(0).to(weight_dtype), db, at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor fused_rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps,
                          bool bfloat16_out) {
  TORCH_CHECK(x.size(-1) == weight.size(0), "fused_rms_norm: x's last dimension ", x.size(-1),
              " is not the weight's ", weight.size(0));
  return RowNorm<false>::apply(fused_kernel_input(x), weight, c10::nullopt, eps, bfloat16_out);
}

at::Tensor fused_layer_norm(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                            double eps, bool bfloat16_out) {
  TORCH_CHECK(x.size(-1) == weight.size(0) && (!bias.defined() || bias.sizes() == weight.sizes()),
              "fused_layer_norm: x's last dimension ", x.size(-1), " is not the weight's ",
              weight.size(0), bias.defined() ? " and the bias's" : "");
  return RowNorm<true>::apply(fused_kernel_input(x), weight,
                              bias.defined() ? c10::optional<at::Tensor>(bias) : c10::nullopt, eps,
                              bfloat16_out);
}

}  // namespace tinylm
