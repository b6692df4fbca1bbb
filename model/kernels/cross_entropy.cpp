#include "model/kernels/cross_entropy.h"

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cmath>
#include <type_traits>
#include <vector>

#include "model/kernels/element_io.h"
#include "model/kernels/row_chunks.h"
#include "model/kernels/row_max.h"

namespace tinylm {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

// Row z (V elements) in the computing type: itself, or widened into `buffer`.
template <class T>
const Widened<T>* widened_row(const T* z, int64_t V, std::vector<Widened<T>>& buffer) {
  if constexpr (std::is_same_v<T, Widened<T>>) {
    return z;
  } else {
    widen_span(z, buffer.data(), V);
    return buffer.data();
  }
}

// Rows [begin, end) of z (N, V): each row's lse, and the sum of their losses in row order
// (in double: the mean over a split's rows must not lose the last ones to rounding).
template <class T>
TINYLM_CPU_CLONES double cross_entropy_rows(const T* z, const int64_t* targets, int64_t V,
                                            Widened<T>* lse, int64_t begin, int64_t end) {
  using W = Widened<T>;
  std::vector<W> buffer(std::is_same_v<T, W> ? 0 : static_cast<size_t>(V));
  double sum = 0;
  for (int64_t n = begin; n < end; ++n) {
    const W* row = widened_row(z + n * V, V, buffer);
    const W max = row_max(row, V);
    W s = 0;
#pragma omp simd reduction(+ : s)
    for (int64_t v = 0; v < V; ++v) s += std::exp(row[v] - max);
    lse[n] = max + std::log(s);
    sum += static_cast<double>(lse[n]) - static_cast<double>(row[targets[n]]);
  }
  return sum;
}

// Rows [begin, end) of dz = (softmax(z) - onehot(t)) scale, in z's type (bfloat16 rounded
// once from float32).
template <class T>
TINYLM_CPU_CLONES void cross_entropy_backward_rows(const T* z, const int64_t* targets,
                                                   const Widened<T>* lse, Widened<T> scale, T* dz,
                                                   int64_t V, int64_t begin, int64_t end) {
  using W = Widened<T>;
  constexpr bool direct = std::is_same_v<T, W>;
  std::vector<W> in(direct ? 0 : static_cast<size_t>(V)), out(direct ? 0 : static_cast<size_t>(V));
  for (int64_t n = begin; n < end; ++n) {
    const W* row = widened_row(z + n * V, V, in);
    W* d;
    if constexpr (direct)
      d = dz + n * V;
    else
      d = out.data();
    const W l = lse[n];
#pragma omp simd
    for (int64_t v = 0; v < V; ++v) d[v] = std::exp(row[v] - l) * scale;
    d[targets[n]] -= scale;
    if constexpr (!direct) store_span(d, dz + n * V, V);
  }
}

class CrossEntropy : public torch::autograd::Function<CrossEntropy> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& logits_in,
                            const at::Tensor& targets_in) {
    const at::Tensor logits = logits_in.contiguous(), targets = targets_in.contiguous();
    const int64_t N = logits.size(0), V = logits.size(1);
    const int64_t* t = targets.data_ptr<int64_t>();
    for (int64_t n = 0; n < N; ++n) {
      TORCH_CHECK(t[n] >= 0 && t[n] < V, "cross entropy: target ", t[n], " at row ", n,
                  " is outside the vocabulary [0, ", V, ")");
    }
    const auto io = logits.scalar_type();
    const auto compute = io == at::kBFloat16 ? at::kFloat : io;
    at::Tensor lse = at::empty({N}, logits.options().dtype(compute));
    // Each chunk of rows its own partial sum, added in chunk order: the same loss whichever
    // thread ran which chunk.
    const RowChunks chunks(N);
    std::vector<double> partial(static_cast<size_t>(chunks.count), 0.0);
    AT_DISPATCH_FLOATING_TYPES_AND(at::kBFloat16, io, "fused_cross_entropy", [&] {
      const scalar_t* z = logits.data_ptr<scalar_t>();
      auto* l = lse.data_ptr<Widened<scalar_t>>();
      at::parallel_for(0, chunks.count, 1, [&](int64_t first, int64_t last) {
        for (int64_t i = first; i < last; ++i)
          partial[static_cast<size_t>(i)] =
              cross_entropy_rows(z, t, V, l, chunks.begin(i), chunks.end(i));
      });
    });
    double total = 0;
    for (const double p : partial) total += p;
    ctx->save_for_backward({logits, targets, lse});
    return at::scalar_tensor(total / static_cast<double>(N), logits.options().dtype(compute));
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &logits = saved[0], &targets = saved[1], &lse = saved[2];
    const int64_t N = logits.size(0), V = logits.size(1);
    const double scale = grads[0].item<double>() / static_cast<double>(N);
    at::Tensor dz = at::empty_like(logits);
    AT_DISPATCH_FLOATING_TYPES_AND(
        at::kBFloat16, logits.scalar_type(), "fused_cross_entropy_backward", [&] {
          using W = Widened<scalar_t>;
          const scalar_t* z = logits.data_ptr<scalar_t>();
          const int64_t* t = targets.data_ptr<int64_t>();
          const W* l = lse.data_ptr<W>();
          scalar_t* d = dz.data_ptr<scalar_t>();
          at::parallel_for(0, N, kRowGrain, [&](int64_t b, int64_t e) {
            cross_entropy_backward_rows(z, t, l, static_cast<W>(scale), d, V, b, e);
          });
        });
    return {dz, at::Tensor()};
  }
};

}  // namespace

at::Tensor fused_cross_entropy(const at::Tensor& logits, const at::Tensor& targets) {
  TORCH_CHECK(logits.dim() == 2 && logits.size(0) > 0 && logits.size(1) > 0,
              "cross entropy: logits must be (N, V) with N, V > 0, got ", logits.sizes());
  TORCH_CHECK(
      targets.dim() == 1 && targets.size(0) == logits.size(0) && targets.scalar_type() == at::kLong,
      "cross entropy: targets must be int64 (", logits.size(0), "), got ", targets.scalar_type(),
      " ", targets.sizes());
  return CrossEntropy::apply(logits, targets);
}

}  // namespace tinylm
