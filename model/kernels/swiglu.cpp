#include "model/kernels/swiglu.h"

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "model/kernels/element_io.h"
#include "model/kernels/row_chunks.h"

namespace tinylm {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

// The activation and its gradient on spans of n elements, in a kernel's computing type W.
template <class W>
inline void swiglu_span(const W* g, const W* u, W* y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = g[i] / (W(1) + std::exp(-g[i])) * u[i];
}

template <class W>
inline void swiglu_backward_span(const W* gy, const W* g, const W* u, W* dg, W* du, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const W s = W(1) / (W(1) + std::exp(-g[i]));
    du[i] = gy[i] * g[i] * s;
    dg[i] = gy[i] * u[i] * s * (W(1) + g[i] * (W(1) - s));
  }
}

// Rows [begin, end) of [gate; up] (N, 2H) into y (N, H). bfloat16 goes through float32
// buffers a chunk at a time (element_io.h): GCC vectorises the widening, the arithmetic and
// the rounding each on its own, where one loop doing all three ran at half float32's speed.
template <class T>
TINYLM_CPU_CLONES void swiglu_rows(const T* gate_up, T* y, int64_t H, int64_t begin, int64_t end) {
  using W = Widened<T>;
  for (int64_t n = begin; n < end; ++n) {
    const T* g = gate_up + n * 2 * H;
    const T* u = g + H;
    T* yr = y + n * H;
    if constexpr (std::is_same_v<T, W>) {
      swiglu_span(g, u, yr, H);
    } else {
      for (int64_t c = 0; c < H; c += kWidenedChunk) {
        const int64_t len = std::min(kWidenedChunk, H - c);
        W gw[kWidenedChunk], uw[kWidenedChunk], yw[kWidenedChunk];
        widen_span(g + c, gw, len);
        widen_span(u + c, uw, len);
        swiglu_span(gw, uw, yw, len);
        store_span(yw, yr + c, len);
      }
    }
  }
}

template <class T>
TINYLM_CPU_CLONES void swiglu_backward_rows(const T* grad, const T* gate_up, T* d_gate_up,
                                            int64_t H, int64_t begin, int64_t end) {
  using W = Widened<T>;
  for (int64_t n = begin; n < end; ++n) {
    const T* gy = grad + n * H;
    const T* g = gate_up + n * 2 * H;
    const T* u = g + H;
    T* dg = d_gate_up + n * 2 * H;
    T* du = dg + H;
    if constexpr (std::is_same_v<T, W>) {
      swiglu_backward_span(gy, g, u, dg, du, H);
    } else {
      for (int64_t c = 0; c < H; c += kWidenedChunk) {
        const int64_t len = std::min(kWidenedChunk, H - c);
        W gyw[kWidenedChunk], gw[kWidenedChunk], uw[kWidenedChunk], dgw[kWidenedChunk],
            duw[kWidenedChunk];
        widen_span(gy + c, gyw, len);
        widen_span(g + c, gw, len);
        widen_span(u + c, uw, len);
        swiglu_backward_span(gyw, gw, uw, dgw, duw, len);
        store_span(dgw, dg + c, len);
        store_span(duw, du + c, len);
      }
    }
  }
}

class Swiglu : public torch::autograd::Function<Swiglu> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& gate_up_in) {
    const at::Tensor gate_up = gate_up_in.contiguous();
    const int64_t H = gate_up.size(-1) / 2, N = gate_up.numel() / (2 * H);
    std::vector<int64_t> shape = gate_up.sizes().vec();
    shape.back() = H;
    at::Tensor y = at::empty(shape, gate_up.options());
    AT_DISPATCH_FLOATING_TYPES_AND(at::kBFloat16, gate_up.scalar_type(), "fused_swiglu", [&] {
      const scalar_t* in = gate_up.data_ptr<scalar_t>();
      scalar_t* out = y.data_ptr<scalar_t>();
      at::parallel_for(0, N, kRowGrain,
                       [&](int64_t begin, int64_t end) { swiglu_rows(in, out, H, begin, end); });
    });
    ctx->save_for_backward({gate_up});
    return y;
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const at::Tensor gate_up = ctx->get_saved_variables()[0];
    const at::Tensor g = grads[0].to(gate_up.scalar_type()).contiguous();
    const int64_t H = gate_up.size(-1) / 2, N = gate_up.numel() / (2 * H);
    at::Tensor d = at::empty_like(gate_up);
    AT_DISPATCH_FLOATING_TYPES_AND(
        at::kBFloat16, gate_up.scalar_type(), "fused_swiglu_backward", [&] {
          const scalar_t *gp = g.data_ptr<scalar_t>(), *in = gate_up.data_ptr<scalar_t>();
          scalar_t* out = d.data_ptr<scalar_t>();
          at::parallel_for(0, N, kRowGrain, [&](int64_t begin, int64_t end) {
            swiglu_backward_rows(gp, in, out, H, begin, end);
          });
        });
    return {d};
  }
};

}  // namespace

at::Tensor fused_swiglu(const at::Tensor& gate_up) {
  TORCH_CHECK(gate_up.size(-1) % 2 == 0, "fused_swiglu: the last dimension ", gate_up.size(-1),
              " is not [gate; up]");
  return Swiglu::apply(gate_up);  // bfloat16 too: it reads and writes it itself
}

}  // namespace tinylm
