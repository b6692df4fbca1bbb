#include "model/analysis/token_circuits.h"

#include <cmath>

#include "model/analysis/head_factors.h"

namespace tinylm {
SingularDirections top_singular_directions(const torch::Tensor& F, const torch::Tensor& G,
                                           int64_t k) {
  const auto [q_f, r_f] = torch::linalg::qr(F.to(torch::kFloat64));      // (V, r), (r, r)
  const auto [q_g, r_g] = torch::linalg::qr(G.to(torch::kFloat64).t());  // (V', r), (r, r)
  const auto [u, s, vh] = torch::linalg::svd(r_f.matmul(r_g.t()), false, c10::nullopt);
  const int64_t n = std::min<int64_t>(k, s.size(0));
  SingularDirections d;
  d.values = s.slice(0, 0, n);
  d.share = s.square().slice(0, 0, n) / s.square().sum().clamp_min(1e-300);
  // Left and right vectors flipped together: M = sum s u v^T keeps its sign.
  const torch::Tensor left = q_f.matmul(u).t().slice(0, 0, n);        // (n, V)
  const torch::Tensor right = q_g.matmul(vh.t()).t().slice(0, 0, n);  // (n, V')
  const torch::Tensor flip = left.gather(1, left.abs().argmax(1, true)).sign();
  d.left = left * flip;
  d.right = right * flip;
  return d;
}

TokenCircuits token_circuits(GPT& model, int64_t k) {
  torch::NoGradGuard no_grad;
  const ModelConfig& c = model->config();
  const int64_t hs = c.head_size();
  const torch::Tensor embedding = model->transformer->wte->weight;  // (V, C)
  const torch::Tensor unembed = folded_unembedding(model);          // (C, V)
  TokenCircuits out;
  for (int64_t l = 0; l < c.n_layer; ++l) {
    Block& block = model->transformer->h[l];
    const HeadProjections e = project_rows(block, embedding);
    const torch::Tensor w_o = block->attn->c_proj->weight;  // (C, C): columns are heads' slots
    out.ov.emplace_back();
    out.qk.emplace_back();
    for (int64_t h = 0; h < c.n_head; ++h) {
      const torch::Tensor g = w_o.slice(1, h * hs, (h + 1) * hs).t().matmul(unembed);  // (hs, V)
      out.ov.back().push_back(top_singular_directions(e.v[h], g, k));
      out.qk.back().push_back(
          top_singular_directions(e.q[h] / std::sqrt(static_cast<double>(hs)), e.k[h].t(), k));
    }
  }
  return out;
}

}  // namespace tinylm
