#include "model/ops/onednn_matmul.h"

#include <array>
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>
#include <unordered_map>

#ifdef TINYLM_WITH_ONEDNN
#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace tinylm {

#ifdef TINYLM_WITH_ONEDNN
namespace {

using dnnl::memory;

const dnnl::engine& cpu_engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// A product's shapes, strides and options: what its primitive was made for. Its dims are
// (batch, rows, cols) for every operand, a matrix being a batch of one.
struct ProductKey {
  std::array<int64_t, 3> a_sizes, a_strides, b_sizes, b_strides;
  bool in_f32, out_f32, has_bias;
  float alpha, beta;
  bool operator<(const ProductKey& o) const {
    return std::tie(a_sizes, a_strides, b_sizes, b_strides, in_f32, out_f32, has_bias, alpha,
                    beta) < std::tie(o.a_sizes, o.a_strides, o.b_sizes, o.b_strides, o.in_f32,
                                     o.out_f32, o.has_bias, o.alpha, o.beta);
  }
};

struct Product {
  dnnl::matmul primitive;
  memory::desc a, b, bias, out, scratchpad;
};

// A batch of one is described as a matrix: oneDNN 2.6 runs its brgemm kernels on a transposed
// operand only in two dimensions, and falls back on its older gemm:jit kernels for (1, M, K)
// with a transposed weight. Those were 10% slower at the model's shapes, and their first product
// of a type spent 36 ms making all of gemm:jit's kernels (docs/MEASUREMENTS.md, round fourteen).
memory::dims dims_of(const std::array<int64_t, 3>& a, int64_t batch) {
  if (batch == 1) return {a[1], a[2]};
  return {a[0], a[1], a[2]};
}

// The primitive for one key. The scratchpad is the caller's (user mode), so that two threads
// may run primitives that oneDNN's own cache made from one description.
Product make_product(const ProductKey& k) {
  const int64_t batch = k.a_sizes[0], m = k.a_sizes[1], n = k.b_sizes[2];
  Product p;
  const auto in = k.in_f32 ? memory::data_type::f32 : memory::data_type::bf16;
  p.a = memory::desc(dims_of(k.a_sizes, batch), in, dims_of(k.a_strides, batch));
  p.b = memory::desc(dims_of(k.b_sizes, batch), in, dims_of(k.b_strides, batch));
  p.out = memory::desc(dims_of({batch, m, n}, batch),
                       k.out_f32 ? memory::data_type::f32 : memory::data_type::bf16,
                       dims_of({m * n, n, 1}, batch));
  if (k.has_bias)
    p.bias =
        memory::desc(dims_of({1, 1, n}, batch), memory::data_type::f32, dims_of({n, n, 1}, batch));
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (k.alpha != 1.0f) attr.set_output_scales(0, {k.alpha});
  if (k.beta != 0.0f) {
    dnnl::post_ops sum;
    sum.append_sum(k.beta);
    attr.set_post_ops(sum);
  }
  const auto desc = k.has_bias ? dnnl::matmul::desc(p.a, p.b, p.bias, p.out)
                               : dnnl::matmul::desc(p.a, p.b, p.out);
  const dnnl::matmul::primitive_desc pd(desc, attr, cpu_engine());
  p.scratchpad = pd.scratchpad_desc();
  p.primitive = dnnl::matmul(pd);
  return p;
}

// A matrix's or a batch's sizes and strides as a batch's. A stride of a dimension of size 1 is
// arbitrary in LibTorch; oneDNN wants it plausible, so such a dimension gets a dense one.
void batch_layout(const torch::Tensor& t, std::array<int64_t, 3>& sizes,
                  std::array<int64_t, 3>& strides) {
  const int64_t offset = 3 - t.dim();
  for (int64_t d = 0; d < 3; ++d) {
    sizes[d] = d < offset ? 1 : t.size(d - offset);
    strides[d] = d < offset ? 0 : t.stride(d - offset);
  }
  if (sizes[2] == 1) strides[2] = 1;
  if (sizes[1] == 1) strides[1] = sizes[2] * strides[2];
  if (sizes[0] == 1) strides[0] = sizes[1] * strides[1];
}

// This thread's primitives and scratchpad: no lock on the way to a product.
struct ThreadProducts {
  std::map<ProductKey, Product> products;
  dnnl::stream stream{cpu_engine()};
  torch::Tensor scratchpad = torch::empty({0}, torch::kUInt8);

  const Product& get(const ProductKey& key) {
    auto found = products.find(key);
    if (found == products.end()) found = products.emplace(key, make_product(key)).first;
    return found->second;
  }
};

ThreadProducts& thread_products() {
  thread_local ThreadProducts products;
  return products;
}

void* writable(const torch::Tensor& t) { return const_cast<void*>(t.data_ptr()); }

// The name of the kernel oneDNN picks for a small product of `type` on this CPU ("ref..." for
// its reference loop), or "" where it has none.
std::string kernel_for(memory::data_type type) {
  try {
    const memory::desc a({16, 32}, type, memory::dims{32, 1});
    const memory::desc b({32, 16}, type, memory::dims{16, 1});
    const memory::desc out({16, 16}, memory::data_type::f32, memory::dims{16, 1});
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, out), cpu_engine());
    return pd.impl_info_str();
  } catch (const dnnl::error&) {
    return "";
  }
}

}  // namespace

bool onednn_matmul_built() { return true; }

bool onednn_bfloat16_runs() {
  static const bool runs = [] {
    const std::string kernel = kernel_for(memory::data_type::bf16);
    return !kernel.empty() && kernel.rfind("ref", 0) != 0;
  }();
  return runs;
}

bool onednn_float32_beats_blas() {
  static const bool beats = kernel_for(memory::data_type::f32).rfind("brg:avx512", 0) == 0;
  return beats;
}

void onednn_matmul(const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& bias,
                   torch::Tensor& out, float alpha, float beta) {
  TORCH_CHECK((a.dim() == 2 || a.dim() == 3) && b.dim() == a.dim() && out.dim() == a.dim(),
              "onednn_matmul: expected matrices or batches of them, got ", a.sizes(), " x ",
              b.sizes(), " -> ", out.sizes());
  const bool in_f32 = a.scalar_type() == torch::kFloat32;
  TORCH_CHECK((a.scalar_type() == torch::kBFloat16 || in_f32) && b.scalar_type() == a.scalar_type(),
              "onednn_matmul: a and b must be both bfloat16 or both float32");
  TORCH_CHECK(a.is_cpu() && b.is_cpu() && out.is_cpu(), "onednn_matmul: CPU tensors only");
  const int64_t m = a.size(-2), k = a.size(-1), n = b.size(-1);
  TORCH_CHECK(b.size(-2) == k && out.size(-2) == m && out.size(-1) == n &&
                  (a.dim() == 2 || (b.size(0) == a.size(0) && out.size(0) == a.size(0))),
              "onednn_matmul: shapes ", a.sizes(), " x ", b.sizes(), " -> ", out.sizes());
  TORCH_CHECK(out.is_contiguous() &&
                  (out.scalar_type() == torch::kFloat32 || out.scalar_type() == torch::kBFloat16),
              "onednn_matmul: out must be contiguous float32 or bfloat16");
  TORCH_CHECK(!in_f32 || out.scalar_type() == torch::kFloat32,
              "onednn_matmul: float32 products write float32");
  const bool has_bias = bias.defined();
  TORCH_CHECK(!has_bias || (bias.scalar_type() == torch::kFloat32 && bias.is_contiguous() &&
                            bias.dim() == 1 && bias.numel() == n),
              "onednn_matmul: bias must be a contiguous float32 vector of ", n);
  if (out.numel() == 0) return;
  if (k == 0) {  // an empty sum: oneDNN is not asked
    if (beta == 0.0f) {
      out.zero_();  // never read, as oneDNN never reads it at beta 0
    } else {
      out.mul_(beta);
    }
    if (has_bias) out.add_(bias, alpha);
    return;
  }
  ProductKey key{};
  batch_layout(a, key.a_sizes, key.a_strides);
  batch_layout(b, key.b_sizes, key.b_strides);
  key.in_f32 = in_f32;
  key.out_f32 = out.scalar_type() == torch::kFloat32;
  key.has_bias = has_bias;
  key.alpha = alpha;
  key.beta = beta;
  ThreadProducts& thread = thread_products();
  const Product& p = thread.get(key);
  const size_t scratch_bytes = p.scratchpad.get_size();
  if (static_cast<size_t>(thread.scratchpad.numel()) < scratch_bytes)
    thread.scratchpad = torch::empty({static_cast<int64_t>(scratch_bytes)}, torch::kUInt8);
  const dnnl::engine& engine = cpu_engine();
  std::unordered_map<int, memory> args{
      {DNNL_ARG_SRC, memory(p.a, engine, writable(a))},
      {DNNL_ARG_WEIGHTS, memory(p.b, engine, writable(b))},
      {DNNL_ARG_DST, memory(p.out, engine, out.data_ptr())},
      {DNNL_ARG_SCRATCHPAD, memory(p.scratchpad, engine, thread.scratchpad.data_ptr())}};
  if (has_bias) args.emplace(DNNL_ARG_BIAS, memory(p.bias, engine, writable(bias)));
  p.primitive.execute(thread.stream, args);
}

#else  // no oneDNN API in this build

bool onednn_matmul_built() { return false; }
bool onednn_bfloat16_runs() { return false; }
bool onednn_float32_beats_blas() { return false; }
void onednn_matmul(const torch::Tensor&, const torch::Tensor&, const torch::Tensor&, torch::Tensor&,
                   float, float) {
  throw std::logic_error("onednn_matmul: this build has no oneDNN API (libdnnl-dev)");
}

#endif

}  // namespace tinylm
