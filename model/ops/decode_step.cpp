#include "model/ops/decode_step.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "model/kernels/matrix_vector.h"
#include "model/ops/blas.h"

namespace tinylm {
namespace {

constexpr double kNormEps = 1e-5;  // model/norm.h

float* ptr(const torch::Tensor& t) { return t.defined() ? t.data_ptr<float>() : nullptr; }

// y (rows, out) = x (rows, in) W^T + b with W (out, in) row-major, as torch's Linear.
void linear(const float* x, int64_t rows, const torch::Tensor& weight, const torch::Tensor& bias,
            float* y) {
  const int out = static_cast<int>(weight.size(0)), in = static_cast<int>(weight.size(1));
  const float one = 1.0f, zero = 0.0f;
  if (rows <= kMaxMatrixVectorRows) {
    for (int64_t r = 0; r < rows; ++r)
      matrix_vector(ptr(weight), out, in, x + r * in, ptr(bias), y + r * out);
    return;
  }
  // Column-major (rows, out) = x (column-major (in, rows), transposed) times W (column-major
  // (in, out)): W is the right operand, which OpenBLAS packs without a transpose. The result
  // is y transposed; it is turned back with the bias added.
  const int n = static_cast<int>(rows);
  std::vector<float> yt(static_cast<size_t>(rows * out));
  sgemm_("T", "N", &n, &out, &in, &one, x, &in, ptr(weight), &in, &zero, yt.data(), &n);
  const float* b = ptr(bias);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t o = 0; o < out; ++o)
      y[r * out + o] = yt[static_cast<size_t>(o * rows + r)] + (b ? b[o] : 0.0f);
  }
}

// LayerNorm or RMSNorm of each row of x (rows, C) into y, as model/norm.h.
void norm(const float* x, int64_t rows, int64_t C, const Norm& module, float* y) {
  const float* w = ptr(module->weight);
  const float* b = ptr(module->bias);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * C;
    float* yr = y + r * C;
    double mean = 0.0, square = 0.0;
    for (int64_t i = 0; i < C; ++i) {
      mean += xr[i];
      square += double(xr[i]) * xr[i];
    }
    mean /= static_cast<double>(C);
    square /= static_cast<double>(C);
    const bool centre = module->centres();
    const double variance = centre ? square - mean * mean : square;
    const float inv = static_cast<float>(1.0 / std::sqrt(variance + kNormEps));
    const float shift = centre ? static_cast<float>(mean) : 0.0f;
    for (int64_t i = 0; i < C; ++i) yr[i] = (xr[i] - shift) * inv * w[i] + (b ? b[i] : 0.0f);
  }
}

// Rotates one head vector (hs) by position p's angles, in place (model/rope.h).
void rotate(float* v, int64_t hs, const float* cos, const float* sin) {
  const int64_t half = hs / 2;
  for (int64_t i = 0; i < half; ++i) {
    const float x1 = v[i], x2 = v[i + half];
    v[i] = x1 * cos[i] - x2 * sin[i];
    v[i + half] = x1 * sin[i] + x2 * cos[i];
  }
}

}  // namespace

bool can_decode_directly(GPT& model, const KVCache& cache) {
  const torch::Tensor& w = model->transformer->wte->weight;
  return !model->is_training() && !model->has_hooks() && w.device().is_cpu() &&
         w.scalar_type() == torch::kFloat32 && cache.length() > 0 && cache.keys(0).defined() &&
         cache.keys(0).scalar_type() == torch::kFloat32;
}

torch::Tensor decode_step(GPT& model, const torch::Tensor& ids, KVCache& cache) {
  torch::NoGradGuard no_grad;
  const ModelConfig& c = model->config();
  const int64_t B = ids.size(0), C = c.n_embd, nh = c.n_head, kvh = c.kv_heads(),
                hs = c.head_size();
  const int64_t group = nh / kvh, qkv_width = C + 2 * kvh * hs;
  const auto id = ids.to(torch::kInt64).contiguous();
  // The embedding row is read by pointer: an id outside the vocabulary must not reach it.
  for (int64_t b = 0; b < B; ++b) {
    const int64_t v = id.data_ptr<int64_t>()[b];
    if (v < 0 || v >= c.vocab_size) {
      throw std::invalid_argument("decode_step: token id " + std::to_string(v) +
                                  " is outside the vocabulary [0, " + std::to_string(c.vocab_size) +
                                  ")");
    }
  }
  if (c.positions().slides()) {
    cache.make_room(1);
  } else if (cache.length() >= cache.capacity()) {
    throw std::invalid_argument("decode_step: the KV cache is full and " +
                                std::string(name_of(c.pos_encoding)) +
                                " positions cannot slide; clear it and re-encode the window");
  }
  const int64_t slot = cache.length(), keys = slot + 1;  // the new position and the count
  const int64_t position = c.positions().slides() ? cache.next_position() : slot;

  // The residual stream (B, C): embedding plus the position's row.
  std::vector<float> x(static_cast<size_t>(B * C)), h(x.size()), z(x.size()), y(x.size());
  const torch::Tensor table = c.positions().slides() ? torch::Tensor() : model->positions(slot + 1);
  const torch::Tensor pos_row =
      table.defined() ? table.select(0, slot).contiguous() : torch::Tensor();
  const float* pos = ptr(pos_row);
  const auto token_scale = static_cast<float>(c.positions().token_scale(C));
  for (int64_t b = 0; b < B; ++b) {
    const float* e = ptr(model->transformer->wte->weight) + id.data_ptr<int64_t>()[b] * C;
    for (int64_t i = 0; i < C; ++i) x[b * C + i] = e[i] * token_scale + (pos ? pos[i] : 0.0f);
  }

  // The rotation of this position, for rope.
  const bool rotary = c.positions().rotates;
  std::vector<float> cos(static_cast<size_t>(hs / 2)), sin(cos.size());
  if (rotary) rope_row(position, hs, cos.data(), sin.data());

  // The score bias of relative and alibi positions at each distance slot - j: T5's bucket
  // of it, or the distance itself.
  const bool relative = c.pos_encoding == PosEncoding::kRelative;
  const bool alibi = c.pos_encoding == PosEncoding::kAlibi;
  std::vector<int64_t> bucket(static_cast<size_t>(relative ? keys : 0));
  for (int64_t j = 0; j < keys && relative; ++j)
    bucket[static_cast<size_t>(j)] = relative_bucket(slot - j, c.num_buckets, c.max_distance);

  std::vector<float> qkv(static_cast<size_t>(B * qkv_width)), scores(static_cast<size_t>(keys)),
      hidden;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hs)));
  for (size_t l = 0; l < static_cast<size_t>(c.n_layer); ++l) {
    Block& block = model->transformer->h[l];
    // Attention: q, k, v of the new tokens; k and v join the cache at `slot`.
    norm(x.data(), B, C, block->ln_1, h.data());
    linear(h.data(), B, block->attn->c_attn->weight, block->attn->c_attn->bias, qkv.data());
    float* K = ptr(cache.keys(l));
    float* V = ptr(cache.values(l));
    const int64_t stride = cache.keys(l).size(2), first = cache.offset();  // storage positions
    for (int64_t b = 0; b < B; ++b) {
      float* row = qkv.data() + b * qkv_width;
      for (int64_t head = 0; head < nh && rotary; ++head)
        rotate(row + head * hs, hs, cos.data(), sin.data());
      for (int64_t g = 0; g < kvh; ++g) {
        float* k = row + C + g * hs;
        if (rotary) rotate(k, hs, cos.data(), sin.data());
        const int64_t at = ((b * kvh + g) * stride + first + slot) * hs;
        std::copy_n(k, hs, K + at);
        std::copy_n(row + C + kvh * hs + g * hs, hs, V + at);
      }
      // Each head: softmax(q . k_j / sqrt(hs)) over the cached positions and this one, then
      // the weighted sum of the values; both products through BLAS (vectorised).
      const int n_keys = static_cast<int>(keys), width = static_cast<int>(hs), inc = 1;
      const float zero = 0.0f, one = 1.0f;
      for (int64_t head = 0; head < nh; ++head) {
        const float* q = row + head * hs;
        const int64_t base = ((b * kvh + head / group) * stride + first) * hs;
        // scores = K q: K (keys, hs) row-major is column-major (hs, keys).
        sgemv_("T", &width, &n_keys, &scale, K + base, &width, q, &inc, &zero, scores.data(), &inc);
        if (relative) {
          const float* w = ptr(block->attn->rel_bias->weight) + head * c.num_buckets;
          for (int64_t j = 0; j < keys; ++j)
            scores[static_cast<size_t>(j)] += w[bucket[static_cast<size_t>(j)]];
        } else if (alibi) {
          const float slope = ptr(block->attn->alibi_slopes())[head];
          for (int64_t j = 0; j < keys; ++j)
            scores[static_cast<size_t>(j)] -= slope * static_cast<float>(slot - j);
        }
        const float best = *std::max_element(scores.begin(), scores.begin() + keys);
        float total = 0.0f;
        for (int64_t j = 0; j < keys; ++j) {
          total +=
              (scores[static_cast<size_t>(j)] = std::exp(scores[static_cast<size_t>(j)] - best));
        }
        const float inv = one / total;
        // z = V^T p: V (keys, hs) row-major is column-major (hs, keys).
        sgemv_("N", &width, &n_keys, &inv, V + base, &width, scores.data(), &inc, &zero,
               z.data() + b * C + head * hs, &inc);
      }
    }
    linear(z.data(), B, block->attn->c_proj->weight, block->attn->c_proj->bias, y.data());
    for (size_t i = 0; i < x.size(); ++i) x[i] += y[i];
    if (!block->mlp) continue;

    // MLP: GELU, or SwiGLU's silu(gate) * up.
    norm(x.data(), B, C, block->ln_2, h.data());
    const MLP& mlp = block->mlp;
    const int64_t width = mlp->c_fc->weight.size(0), H = mlp->c_proj->weight.size(1);
    hidden.resize(static_cast<size_t>(B * width));
    linear(h.data(), B, mlp->c_fc->weight, mlp->c_fc->bias, hidden.data());
    // The activation through LibTorch's vectorised kernels (one operator on the whole batch).
    const torch::Tensor in = torch::from_blob(hidden.data(), {B, width});
    const torch::Tensor post = (mlp->gated() ? torch::silu(in.narrow(1, 0, H)) * in.narrow(1, H, H)
                                             : torch::gelu(in, mlp->gelu_approximation()))
                                   .contiguous();  // (B, H)
    linear(post.data_ptr<float>(), B, mlp->c_proj->weight, mlp->c_proj->bias, y.data());
    for (size_t i = 0; i < x.size(); ++i) x[i] += y[i];
  }
  cache.advance(1);

  norm(x.data(), B, C, model->transformer->ln_f, h.data());
  torch::Tensor logits = torch::empty({B, c.vocab_size});
  linear(h.data(), B, model->unembedding(), torch::Tensor(), logits.data_ptr<float>());
  return logits;  // (B, V)
}

}  // namespace tinylm
