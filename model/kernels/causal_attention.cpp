#include "model/kernels/causal_attention.h"

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "model/kernels/element_io.h"
#include "model/kernels/row_chunks.h"
#include "model/kernels/row_max.h"
#include "model/kernels/tile_gemm.h"

namespace tinylm {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

// The layout of one token's row of qkv: n_head query heads, then n_kv key heads, then n_kv
// value heads, hs wide each.
struct Layout {
  int64_t B, T, n_head, n_kv, hs;
  int64_t width() const { return (n_head + 2 * n_kv) * hs; }
  int64_t C() const { return n_head * hs; }
  int64_t k_offset(int64_t h) const { return (n_head + h) * hs; }
  int64_t v_offset(int64_t h) const { return (n_head + n_kv + h) * hs; }
};

// Position t's rotation of one head, hs wide, as three rows of hs: the head's rotated x is
// r[j] = x[j] c[j] + x[j + half] a[j] + x[j - half] b[j], where a is -sign sin on the first
// half (0 on the second) and b sign sin on the second (0 on the first). Every head of a
// position takes the same three rows: (T, 3, hs) for a call.
template <class T>
std::vector<T> rotation_rows(const T* cos, const T* sin, const Layout& l, T sign) {
  const int64_t half = l.hs / 2;
  std::vector<T> rows(static_cast<size_t>(l.T * 3 * l.hs), T(0));
  for (int64_t t = 0; t < l.T; ++t) {
    T* c = rows.data() + t * 3 * l.hs;
    T* a = c + l.hs;
    T* b = a + l.hs;
    for (int64_t i = 0; i < half; ++i) {
      c[i] = c[half + i] = cos[t * half + i];
      a[i] = -sign * sin[t * half + i];
      b[half + i] = sign * sin[t * half + i];
    }
  }
  return rows;
}

// Rotates (sign = +1) or rotates back (sign = -1, the transpose: the gradient) the query and
// key heads of rows [begin, end) of (B T, width) from `in` into `out`; values are copied.
// Position of row n: n mod T; `rotation` its rows (rotation_rows). In and Out are T or
// bfloat16 (element_io.h): bfloat16 q, k and v are widened on their way in, a bfloat16
// gradient rounded once on its way out. Each row is widened into a buffer with half a head of
// zeros each side, so a head reads its other half through a shifted load and every loop runs
// a whole head: looping over a half head (12 elements at the default shape, less than one
// AVX-512 vector) left the rotation to GCC's remainder code.
template <class T, class In, class Out>
TINYLM_CPU_CLONES void rotate_rows(const In* in, Out* out, const T* rotation, Layout l,
                                   int64_t begin, int64_t end) {
  constexpr bool direct = std::is_same_v<T, Out>;
  const int64_t half = l.hs / 2, W = l.width(), rotated = (l.n_head + l.n_kv) * l.hs;
  std::vector<T> padded(static_cast<size_t>(W + 2 * half), T(0));
  std::vector<T> buffer(direct ? 0 : static_cast<size_t>(W));
  T* x = padded.data() + half;
  for (int64_t n = begin; n < end; ++n) {
    const T* c = rotation + (n % l.T) * 3 * l.hs;
    const T* a = c + l.hs;
    const T* b = a + l.hs;
    widen_span(in + n * W, x, W);
    T* r;  // the row in T: the output itself, or the buffer it is rounded from
    if constexpr (direct)
      r = out + n * W;
    else
      r = buffer.data();
    for (int64_t head = 0; head < rotated; head += l.hs) {
      const T* xh = x + head;
      T* rh = r + head;
#pragma omp simd
      for (int64_t j = 0; j < l.hs; ++j)
        rh[j] = xh[j] * c[j] + xh[j + half] * a[j] + xh[j - half] * b[j];
    }
#pragma omp simd
    for (int64_t i = rotated; i < W; ++i) r[i] = x[i];
    if constexpr (!direct) store_span(r, out + n * W, W);
  }
}

// Row i's columns [0, i] rounded up to whole vectors of T, at most Tn: the loops below run
// over the masked tail too, so that they have no scalar remainder (which cost half the
// softmax's time).
template <class T>
int64_t whole_vectors_to(int64_t i, int64_t Tn) {
  return std::min(Tn, (i + kLanes<T>) / kLanes<T> * kLanes<T>);
}

// Row i's elements after i in the vector of kLanes<T> that holds i (from `last`, up to n) set
// to `value`: by one select and one whole-vector store where that vector is whole. Element by
// element, the loads of that vector just after waited for the scattered stores to reach the
// cache (a failed store-to-load forward; a third of the softmax's samples sat after two such
// loads), and attention's forward took 1.08x as long (docs/MEASUREMENTS.md, round twenty-one).
template <class T>
inline __attribute__((always_inline)) void set_after(T* row, int64_t i, int64_t last, int64_t n,
                                                     T value) {
  if (n - last != kLanes<T>) {
    for (int64_t j = i + 1; j < n; ++j) row[j] = value;
    return;
  }
  using Index = std::conditional_t<sizeof(T) == 4, int32_t, int64_t>;
  typedef T Vec __attribute__((vector_size(64)));
  typedef Index Lanes __attribute__((vector_size(64)));
  Lanes lane;
  for (int k = 0; k < kLanes<T>; ++k) lane[k] = k;
  Vec v;
  std::memcpy(&v, row + last, sizeof v);
  const Vec fill = value - Vec{};  // value in every lane
  v = lane > static_cast<Index>(i - last) ? fill : v;
  std::memcpy(row + last, &v, sizeof v);
}

// Rows [begin, end) of S (T, T) in place: row i's softmax over j <= i, zeros after. No loop
// over a row tests j <= i: with the test in them GCC split each loop at i, and the part up to
// i, short in a row's last vector, ran scalar expf calls, as much time as the vector calls.
// So the masked tail of the row's last vector first takes row[0]'s score (a value that
// changes neither the max nor, once zeroed, the sum) and is zeroed after the exponentials.
// (A very negative score instead would cost more: libmvec's expf takes a scalar path for
// each lane that underflows.) The max: row_max.h.
template <class T>
TINYLM_CPU_CLONES void causal_softmax_rows(T* S, int64_t Tn, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) {
    T* row = S + i * Tn;
    const int64_t n = whole_vectors_to<T>(i, Tn);
    const int64_t last = i / kLanes<T> * kLanes<T>;
    set_after(row, i, last, n, row[0]);
    const T max = row_max(row, n);
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) row[j] = std::exp(row[j] - max);
    set_after(row, i, last, n, T(0));
    for (int64_t j = n; j < Tn; ++j) row[j] = 0;
    T sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < n; ++j) sum += row[j];
    const T inv = T(1) / sum;
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) row[j] *= inv;
  }
}

// Rows [begin, end) of dP (T, T) in place -> dS = P (dP - rowsum(P dP)) scale, zero where P
// is masked (P is zero there).
template <class T>
TINYLM_CPU_CLONES void softmax_backward_rows(const T* P, T* dP, int64_t Tn, T scale, int64_t begin,
                                             int64_t end) {
  for (int64_t i = begin; i < end; ++i) {
    const T* p = P + i * Tn;
    T* d = dP + i * Tn;
    const int64_t n = whole_vectors_to<T>(i, Tn);
    T dot = 0;
#pragma omp simd reduction(+ : dot)
    for (int64_t j = 0; j < n; ++j) dot += p[j] * d[j];
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) d[j] = p[j] * (d[j] - dot) * scale;
    for (int64_t j = n; j < Tn; ++j) d[j] = 0;
  }
}

// The T x T tile is cut into bands of this many rows; band r's rows only see the columns
// before its end, so the products skip most of the masked half: at T = 64 they do 5/8 of
// the full tile's work, at T = 256 17/32. Narrow bands are cheap since the products are
// tile_gemm's, not a BLAS call each: attention's operator time fell 8-13% from 32-row bands
// in two of three alternating rounds (8-row bands were no faster; docs/MEASUREMENTS.md).
inline constexpr int kBandRows = 16;

template <class T, class In, class Out>
void rotate(const In* in, Out* out, const at::Tensor& cos, const at::Tensor& sin, const Layout& l,
            T sign) {
  const std::vector<T> rotation = rotation_rows(cos.data_ptr<T>(), sin.data_ptr<T>(), l, sign);
  at::parallel_for(0, l.B * l.T, kRowGrain, [&](int64_t begin, int64_t end) {
    rotate_rows(in, out, rotation.data(), l, begin, end);
  });
}

// Rows x cols of `from` (leading dimension ld_from) into `to` (ld_to), each element widened or
// rounded once (element_io.h). A clone per CPU: built for the baseline, as `attend` is, the
// rounding to bfloat16 ran in SSE2 code, 4 floats an instruction.
template <class From, class To>
TINYLM_CPU_CLONES void convert_block(const From* from, int64_t ld_from, To* to, int64_t ld_to,
                                     int64_t rows, int64_t cols) {
  for (int64_t i = 0; i < rows; ++i) {
    const From* in = from + i * ld_from;
    To* out = to + i * ld_to;
#pragma omp simd
    for (int64_t j = 0; j < cols; ++j) store(out[j], widen(in[j]));
  }
}

// Per (batch, kv head) task: its query heads' patterns (B, nh, T, T) and outputs y (B, T, C),
// y in T or in bfloat16 (each band's product made in T, then rounded once).
template <class T, class Out>
void attend(const T* qkv, T* pattern, Out* y, const Layout& l) {
  const int group = static_cast<int>(l.n_head / l.n_kv), Tn = static_cast<int>(l.T),
            hs = static_cast<int>(l.hs), W = static_cast<int>(l.width()),
            C = static_cast<int>(l.C());
  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(hs)));
  constexpr bool direct = std::is_same_v<T, Out>;
  at::parallel_for(0, l.B * l.n_kv, 1, [&](int64_t first, int64_t last) {
    std::vector<T> band_out(direct ? 0 : static_cast<size_t>(kBandRows * hs));
    std::vector<T> K_t(static_cast<size_t>(hs * Tn));  // (hs, T): the group's keys transposed
    for (int64_t task = first; task < last; ++task) {
      const int64_t b = task / l.n_kv, g = task % l.n_kv;
      const T* rows = qkv + b * l.T * W;
      const T* V = rows + l.v_offset(g);
      transpose_into(rows + l.k_offset(g), W, Tn, hs, K_t.data());
      for (int64_t h = g * group; h < (g + 1) * group; ++h) {
        T* P = pattern + (b * l.n_head + h) * l.T * l.T;
        Out* Y = y + b * l.T * C + h * hs;
        for (int r = 0; r < Tn; r += kBandRows) {
          const int band = std::min(kBandRows, Tn - r), seen = r + band;
          tile_gemm<T>(band, seen, hs, scale, rows + r * W + h * hs, W, 1, K_t.data(), Tn, 0,
                       P + r * Tn, Tn);
          causal_softmax_rows(P, l.T, r, r + band);
          if constexpr (direct) {
            tile_gemm<T>(band, hs, seen, 1, P + r * Tn, Tn, 1, V, W, 0, Y + r * C, C);
          } else {
            tile_gemm<T>(band, hs, seen, 1, P + r * Tn, Tn, 1, V, W, 0, band_out.data(), hs);
            convert_block(band_out.data(), hs, Y + r * C, C, band, hs);
          }
        }
      }
    }
  });
}

// The gradients of q, k and v (rotated), written into d_qkv (B, T, width). grad_y is y's
// gradient in y's type: in bfloat16, each head's is widened before its products.
template <class T, class G>
void attend_backward(const T* qkv, const T* pattern, const G* grad_y, T* d_qkv, const Layout& l) {
  const int group = static_cast<int>(l.n_head / l.n_kv), Tn = static_cast<int>(l.T),
            hs = static_cast<int>(l.hs), W = static_cast<int>(l.width()),
            C = static_cast<int>(l.C());
  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(hs)));
  constexpr bool direct = std::is_same_v<T, G>;
  at::parallel_for(0, l.B * l.n_kv, 1, [&](int64_t first, int64_t last) {
    std::vector<T> dS_buffer(static_cast<size_t>(l.T * l.T));  // (T, T): dP, then dS in place
    T* dS = dS_buffer.data();
    std::vector<T> dO_buffer(direct ? 0 : static_cast<size_t>(l.T * hs));  // (T, hs)
    std::vector<T> V_t(static_cast<size_t>(hs * Tn));  // (hs, T): the group's values transposed
    for (int64_t task = first; task < last; ++task) {
      const int64_t b = task / l.n_kv, g = task % l.n_kv;
      const T* rows = qkv + b * l.T * W;
      T* d_rows = d_qkv + b * l.T * W;
      const T* K = rows + l.k_offset(g);
      T *dK = d_rows + l.k_offset(g), *dV = d_rows + l.v_offset(g);
      transpose_into(rows + l.v_offset(g), W, Tn, hs, V_t.data());
      for (int64_t h = g * group; h < (g + 1) * group; ++h) {
        const T* P = pattern + (b * l.n_head + h) * l.T * l.T;
        const G* head_grad = grad_y + b * l.T * C + h * hs;
        const T* dO;
        int ld_dO;
        if constexpr (direct) {
          dO = head_grad, ld_dO = C;
        } else {
          convert_block(head_grad, C, dO_buffer.data(), hs, l.T, hs);
          dO = dO_buffer.data(), ld_dO = hs;
        }
        const T* Q = rows + h * hs;
        T* dQ = d_rows + h * hs;
        const T beta = h == g * group ? 0 : 1;  // the group's first head starts dK and dV
        // Band r of rows: dS, then dQ from the keys it sees.
        for (int r = 0; r < Tn; r += kBandRows) {
          const int band = std::min(kBandRows, Tn - r), seen = r + band;
          tile_gemm<T>(band, seen, hs, 1, dO + r * ld_dO, ld_dO, 1, V_t.data(), Tn, 0, dS + r * Tn,
                       Tn);
          softmax_backward_rows(P, dS, l.T, scale, r, r + band);
          tile_gemm<T>(band, hs, seen, 1, dS + r * Tn, Tn, 1, K, W, 0, dQ + r * W, W);
        }
        // Band c of keys and values: only the rows from c on saw them. P^T and dS^T are
        // read in place, column by column.
        for (int c = 0; c < Tn; c += kBandRows) {
          const int band = std::min(kBandRows, Tn - c), seers = Tn - c;
          tile_gemm<T>(band, hs, seers, 1, P + c * Tn + c, 1, Tn, dO + c * ld_dO, ld_dO, beta,
                       dV + c * W, W);
          tile_gemm<T>(band, hs, seers, 1, dS + c * Tn + c, 1, Tn, Q + c * W, W, beta, dK + c * W,
                       W);
        }
      }
    }
  });
}

// Runs f(T{}, IO{}): T the type computed in, IO the type of qkv, y and their gradients
// (float32 and float64 as they are; bfloat16 computed in float32).
template <class F>
void dispatch_io(at::ScalarType io, const F& f) {
  AT_DISPATCH_FLOATING_TYPES_AND(at::kBFloat16, io, "fused_causal_attention",
                                 [&] { f(Widened<scalar_t>{}, scalar_t{}); });
}

class CausalAttention : public torch::autograd::Function<CausalAttention> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& qkv_in, int64_t n_head,
                            int64_t n_kv, const at::Tensor& cos_in, const at::Tensor& sin_in) {
    const at::Tensor qkv = qkv_in.contiguous();
    const auto io = qkv.scalar_type();
    const auto compute = io == at::kBFloat16 ? at::kFloat : io;
    const int64_t B = qkv.size(0), T = qkv.size(1), hs = qkv.size(2) / (n_head + 2 * n_kv);
    const Layout l{B, T, n_head, n_kv, hs};
    const bool rotary = cos_in.numel() > 0;
    at::Tensor cos, sin, rotated;  // rotated: (B, T, width), q and k rotated, in `compute`
    if (rotary) {
      cos = cos_in.slice(0, 0, T).to(compute).contiguous();
      sin = sin_in.slice(0, 0, T).to(compute).contiguous();
      rotated = at::empty_like(qkv, compute);  // the rotation widens bfloat16 itself
    } else {
      rotated = qkv.to(compute);
    }
    at::Tensor pattern = at::empty({B, n_head, T, T}, qkv.options().dtype(compute));
    at::Tensor y = at::empty({B, T, n_head * hs}, qkv.options());
    dispatch_io(io, [&](auto t, auto io_type) {
      using T = decltype(t);
      using IO = decltype(io_type);
      if (rotary) rotate(qkv.data_ptr<IO>(), rotated.data_ptr<T>(), cos, sin, l, T(1));
      attend(rotated.data_ptr<T>(), pattern.data_ptr<T>(), y.data_ptr<IO>(), l);
    });
    ctx->saved_data["n_head"] = n_head;
    ctx->saved_data["n_kv"] = n_kv;
    ctx->saved_data["rotated"] = rotated;
    ctx->saved_data["pattern"] = pattern;
    ctx->saved_data["cos"] = cos;
    ctx->saved_data["sin"] = sin;
    ctx->saved_data["dtype"] = io;
    return y;
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const at::Tensor rotated = ctx->saved_data["rotated"].toTensor();
    const at::Tensor pattern = ctx->saved_data["pattern"].toTensor();
    const at::Tensor cos = ctx->saved_data["cos"].toTensor();
    const at::Tensor sin = ctx->saved_data["sin"].toTensor();
    const int64_t n_head = ctx->saved_data["n_head"].toInt();
    const int64_t n_kv = ctx->saved_data["n_kv"].toInt();
    const auto io = ctx->saved_data["dtype"].toScalarType();
    const int64_t B = rotated.size(0), T = rotated.size(1);
    const Layout l{B, T, n_head, n_kv, rotated.size(2) / (n_head + 2 * n_kv)};
    const at::Tensor grad_y = grads[0].to(io).contiguous();
    at::Tensor d_rotated = at::empty_like(rotated);
    at::Tensor d_qkv;
    dispatch_io(io, [&](auto t, auto io_type) {
      using T = decltype(t);
      using IO = decltype(io_type);
      attend_backward(rotated.data_ptr<T>(), pattern.data_ptr<T>(), grad_y.data_ptr<IO>(),
                      d_rotated.data_ptr<T>(), l);
      if (cos.numel() > 0) {
        d_qkv = at::empty_like(d_rotated, io);  // rotated back, and rounded once if bfloat16
        rotate(d_rotated.data_ptr<T>(), d_qkv.data_ptr<IO>(), cos, sin, l, T(-1));
      } else {
        d_qkv = d_rotated.to(io);
      }
    });
    return {d_qkv, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor fused_causal_attention(const at::Tensor& qkv, int64_t n_head, int64_t n_kv_head,
                                  const at::Tensor& cos, const at::Tensor& sin) {
  TORCH_CHECK(qkv.dim() == 3, "fused_causal_attention: qkv must be (B, T, width), got ",
              qkv.sizes());
  TORCH_CHECK(
      n_kv_head > 0 && n_head % n_kv_head == 0 && qkv.size(2) % (n_head + 2 * n_kv_head) == 0,
      "fused_causal_attention: width ", qkv.size(2), " is not (", n_head, " + 2 x ", n_kv_head,
      ") heads");
  TORCH_CHECK(!cos.defined() || (cos.size(0) >= qkv.size(1) && sin.sizes() == cos.sizes()),
              "fused_causal_attention: rotary tables shorter than the sequence");
  // Autograd's inputs must be defined tensors: no rotation is passed as empty tables.
  const at::Tensor none = at::empty({0}, qkv.options());
  return CausalAttention::apply(qkv, n_head, n_kv_head, cos.defined() ? cos : none,
                                sin.defined() ? sin : none);  // bfloat16: read and written itself
}

}  // namespace tinylm
