#include "model/ops/onednn_matmul.h"

#include <array>
#include <map>
#include <stdexcept>
#include <string>

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

// A product's shape, strides and options: what its primitive was made for.
using ProductKey = std::array<int64_t, 10>;

struct Product {
  dnnl::matmul primitive;
  memory::desc a, b, bias, out, scratchpad;
};

// The primitive for one key. The scratchpad is the caller's (user mode), so that two threads
// may run primitives that oneDNN's own cache made from one description.
Product make_product(const ProductKey& k) {
  const auto [m, kk, n, a_row, a_col, b_row, b_col, out_f32, has_bias, accumulate] = k;
  Product p;
  p.a = memory::desc({m, kk}, memory::data_type::bf16, {a_row, a_col});
  p.b = memory::desc({kk, n}, memory::data_type::bf16, {b_row, b_col});
  p.out = memory::desc({m, n}, out_f32 ? memory::data_type::f32 : memory::data_type::bf16,
                       memory::dims{n, 1});
  if (has_bias) p.bias = memory::desc({1, n}, memory::data_type::f32, memory::dims{n, 1});
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (accumulate) {
    dnnl::post_ops sum;
    sum.append_sum(1.0f);
    attr.set_post_ops(sum);
  }
  const auto desc = has_bias ? dnnl::matmul::desc(p.a, p.b, p.bias, p.out)
                             : dnnl::matmul::desc(p.a, p.b, p.out);
  const dnnl::matmul::primitive_desc pd(desc, attr, cpu_engine());
  p.scratchpad = pd.scratchpad_desc();
  p.primitive = dnnl::matmul(pd);
  return p;
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

}  // namespace

bool onednn_matmul_built() { return true; }

bool onednn_bfloat16_runs() {
  static const bool native = [] {
    try {
      const memory::desc a({16, 32}, memory::data_type::bf16, memory::dims{32, 1});
      const memory::desc b({32, 16}, memory::data_type::bf16, memory::dims{16, 1});
      const memory::desc out({16, 16}, memory::data_type::f32, memory::dims{16, 1});
      const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, out), cpu_engine());
      return std::string(pd.impl_info_str()).rfind("ref", 0) != 0;
    } catch (const dnnl::error&) {
      return false;
    }
  }();
  return native;
}

void onednn_matmul(const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& bias,
                   torch::Tensor& out, bool accumulate) {
  TORCH_CHECK(a.dim() == 2 && b.dim() == 2 && out.dim() == 2, "onednn_matmul: expected matrices");
  TORCH_CHECK(a.scalar_type() == torch::kBFloat16 && b.scalar_type() == torch::kBFloat16,
              "onednn_matmul: a and b must be bfloat16");
  TORCH_CHECK(a.is_cpu() && b.is_cpu() && out.is_cpu(), "onednn_matmul: CPU tensors only");
  const int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  TORCH_CHECK(b.size(0) == k && out.size(0) == m && out.size(1) == n,
              "onednn_matmul: shapes ", a.sizes(), " x ", b.sizes(), " -> ", out.sizes());
  TORCH_CHECK(out.is_contiguous() &&
                  (out.scalar_type() == torch::kFloat32 || out.scalar_type() == torch::kBFloat16),
              "onednn_matmul: out must be a contiguous float32 or bfloat16 matrix");
  const bool has_bias = bias.defined();
  TORCH_CHECK(!has_bias || (bias.scalar_type() == torch::kFloat32 && bias.is_contiguous() &&
                            bias.numel() == n),
              "onednn_matmul: bias must be a contiguous float32 vector of ", n);
  if (m == 0 || n == 0) return;
  if (k == 0) {  // an empty sum: oneDNN is not asked
    if (!accumulate) out.zero_();
    if (has_bias) out.add_(bias);
    return;
  }
  ThreadProducts& thread = thread_products();
  // A stride of a dimension of size 1 is arbitrary; oneDNN wants it plausible.
  const auto stride = [](const torch::Tensor& t, int d) {
    return t.size(d) == 1 ? (d == 0 ? t.size(1) : int64_t{1}) : t.stride(d);
  };
  const ProductKey key{m,         k,
                       n,         stride(a, 0),
                       stride(a, 1), stride(b, 0),
                       stride(b, 1), out.scalar_type() == torch::kFloat32,
                       has_bias,  accumulate};
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
void onednn_matmul(const torch::Tensor&, const torch::Tensor&, const torch::Tensor&,
                   torch::Tensor&, bool) {
  throw std::logic_error("onednn_matmul: this build has no oneDNN API (libdnnl-dev)");
}

#endif

}  // namespace tinylm
