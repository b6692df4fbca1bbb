#include "model/fused_linear.h"

#include <ATen/record_function.h>

#include "model/autocast_state.h"
#include "model/kernels/row_chunks.h"
#include "model/ops/blas_matmul.h"
#include "model/ops/onednn_matmul.h"
#include "model/weight_grad_queue.h"

namespace tinylm {
namespace {

// A product as onednn_matmul and blas_matmul make it: out = alpha a b [+ alpha bias] + beta out.
using Product = void (*)(const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& bias,
                         torch::Tensor& out, float alpha, float beta);

Product product_of(Float32Products products) {
  return products == Float32Products::kBlas ? &blas_matmul : &onednn_matmul;
}

// The rows of dy (M, N), contiguous, summed in float32 in row order: the bias's gradient.
// LibTorch's sum with a float32 dtype first copies a bfloat16 dy to float32, and the two took
// 5% of a training step's samples under perf. A clone per CPU: built for plain x86-64 the
// loop added 4 floats an instruction (1% of a training run's samples). Each column is summed
// in row order in every clone, so all of them give the same bits.
template <class T>
TINYLM_CPU_CLONES void add_rows(const T* g, int64_t rows, int64_t cols, float* out) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) out[c] += static_cast<float>(g[r * cols + c]);
}

template <class T>
torch::Tensor sum_of_rows(const torch::Tensor& dy) {
  torch::Tensor sum = torch::zeros({dy.size(1)}, dy.options().dtype(torch::kFloat32));
  add_rows(dy.data_ptr<T>(), dy.size(0), dy.size(1), sum.data_ptr<float>());
  return sum;
}

// dW += dy^T x (dy (M, out), x (M, in)) into `weight`'s own gradient, for a thread waiting on
// this thread's WeightGradQueue (model/weight_grad_queue.h) to make, or made here: where no
// thread waits, or the queue is full. False where there is no queue, the weight is no leaf (a
// parameter), the queue keeps it inline, or its gradient is not yet a float32 tensor of its
// shape to add into: the caller then makes dW and hands it to autograd, which adds it in the
// same float32 addition.
bool add_weight_grad(const torch::Tensor& dy, const torch::Tensor& rows,
                     const torch::Tensor& weight, Product multiply) {
  WeightGradQueue* queue = weight_grad_queue();
  if (queue == nullptr || !weight.is_leaf() || !queue->queues(weight)) return false;
  torch::Tensor grad = weight.grad();
  if (!grad.defined() || grad.scalar_type() != torch::kFloat32 || !grad.is_contiguous() ||
      grad.sizes() != weight.sizes())
    return false;
  auto product = [dy, rows, grad, multiply]() mutable {
    RECORD_USER_SCOPE("tinylm::matmul");
    multiply(dy.t(), rows, torch::Tensor(), grad, 1.0f, 1.0f);
  };
  if (!queue->someone_waits() ||
      !queue->push(product, static_cast<int64_t>(dy.nbytes() + rows.nbytes())))
    product();
  return true;
}

// T: c10::BFloat16 or float, the type the products read; `products` a Float32Products, the
// library that makes them (bfloat16's: oneDNN).
template <class T>
class FusedLinear : public torch::autograd::Function<FusedLinear<T>> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& weight,
                               const c10::optional<torch::Tensor>& bias, int64_t products) {
    RECORD_USER_SCOPE("tinylm::matmul");  // a profiler's category (train/step_profile.h)
    const Product multiply = product_of(static_cast<Float32Products>(products));
    const int64_t in = weight.size(1), out = weight.size(0);
    const torch::Tensor rows = operand(x).view({-1, in});  // (M, in)
    const torch::Tensor w = operand(weight);               // (out, in)
    torch::Tensor y = torch::empty({rows.size(0), out}, rows.options());
    multiply(rows, w.t(), bias ? bias->contiguous() : torch::Tensor(), y, 1.0f, 0.0f);
    ctx->save_for_backward({rows, w});
    ctx->saved_data["weight"] = weight;  // whose gradient a queued product adds into
    ctx->saved_data["has_bias"] = bias.has_value();
    ctx->saved_data["x_dtype"] = static_cast<int64_t>(x.scalar_type());
    ctx->saved_data["products"] = products;
    std::vector<int64_t> shape = x.sizes().vec();
    shape.back() = out;
    return y.view(shape);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor& rows = saved[0];  // (M, in)
    const torch::Tensor& w = saved[1];     // (out, in)
    const int64_t in = w.size(1), out = w.size(0);
    const torch::Tensor dy = operand(grads[0]).view({-1, out});  // (M, out)
    const Product multiply =
        product_of(static_cast<Float32Products>(ctx->saved_data["products"].toInt()));
    torch::Tensor dx, dw, db;
    if (ctx->needs_input_grad(0)) {
      dx = torch::empty({rows.size(0), in}, dy.options());
      multiply(dy, w, torch::Tensor(), dx, 1.0f, 0.0f);
      std::vector<int64_t> shape = grads[0].sizes().vec();
      shape.back() = in;
      const auto x_dtype = static_cast<torch::ScalarType>(ctx->saved_data["x_dtype"].toInt());
      dx = dx.view(shape).to(x_dtype);
    }
    if (ctx->needs_input_grad(1) &&
        !add_weight_grad(dy, rows, ctx->saved_data["weight"].toTensor(), multiply)) {
      dw = torch::empty({out, in}, dy.options().dtype(torch::kFloat32));
      multiply(dy.t(), rows, torch::Tensor(), dw, 1.0f, 0.0f);
    }
    // An absent bias is no input of the node: needs_input_grad counts inputs, not arguments.
    if (ctx->saved_data["has_bias"].toBool() && ctx->needs_input_grad(2)) db = sum_of_rows<T>(dy);
    return {dx, dw, db, torch::Tensor()};
  }

 private:
  // t as the products read it: in T, contiguous (no copy when it already is).
  static torch::Tensor operand(const torch::Tensor& t) {
    return t.to(c10::CppTypeToScalarType<T>::value).contiguous();
  }
};

// An undefined tensor is no autograd input; an empty optional is no input at all.
c10::optional<torch::Tensor> optional_bias(const torch::Tensor& bias) {
  return bias.defined() ? c10::optional<torch::Tensor>(bias) : c10::nullopt;
}

}  // namespace

bool bfloat16_linear_takes(const torch::Tensor& x, const torch::Tensor& weight) {
  const bool x_float = x.scalar_type() == torch::kFloat32 || x.scalar_type() == torch::kBFloat16;
  return x.is_cpu() && x_float && weight.is_cpu() && weight.scalar_type() == torch::kFloat32 &&
         weight.dim() == 2 && cpu_autocast_to_bfloat16() && onednn_bfloat16_runs();
}

torch::Tensor bfloat16_linear(const torch::Tensor& x, const torch::Tensor& weight,
                              const torch::Tensor& bias) {
  return FusedLinear<c10::BFloat16>::apply(x, weight, optional_bias(bias),
                                           static_cast<int64_t>(Float32Products::kOnednn));
}

bool float32_linear_takes(const torch::Tensor& x, const torch::Tensor& weight) {
  return x.is_cpu() && x.scalar_type() == torch::kFloat32 && x.dim() >= 2 &&
         x.numel() > x.size(-1) && weight.is_cpu() && weight.scalar_type() == torch::kFloat32 &&
         weight.dim() == 2 && !cpu_autocast_to_bfloat16();
}

Float32Products float32_products() {
  return onednn_float32_beats_blas() ? Float32Products::kOnednn : Float32Products::kBlas;
}

torch::Tensor float32_linear(const torch::Tensor& x, const torch::Tensor& weight,
                             const torch::Tensor& bias, Float32Products products) {
  TORCH_CHECK(products == Float32Products::kBlas || onednn_matmul_built(),
              "float32_linear: this build has no oneDNN API (libdnnl-dev) for its products");
  return FusedLinear<float>::apply(x, weight, optional_bias(bias), static_cast<int64_t>(products));
}

}  // namespace tinylm
