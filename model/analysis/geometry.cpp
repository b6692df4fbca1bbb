#include "model/analysis/geometry.h"

#include <algorithm>
#include <limits>
#include <set>
#include <stdexcept>
#include <string>

#include "model/rope.h"

namespace tinylm {
namespace {

torch::Tensor cosine_similarity_matrix(const torch::Tensor& rows) {  // (N, C) -> (N, N)
  const torch::Tensor unit = rows / rows.norm(2, 1, true).clamp_min(1e-300);
  return unit.matmul(unit.t());
}

}  // namespace

torch::Tensor linear_shift_residual(const torch::Tensor& table, int64_t max_offset) {
  const torch::Tensor pe = table.to(torch::kFloat64);
  const int64_t P = pe.size(0);
  torch::Tensor out =
      torch::full({max_offset}, std::numeric_limits<double>::quiet_NaN(), torch::kFloat64);
  for (int64_t k = 1; k <= max_offset && P - k >= 2; ++k) {
    const torch::Tensor from = pe.slice(0, 0, P - k), to = pe.slice(0, k, P);
    const torch::Tensor fit_from = from.slice(0, 0, P - k, 2), fit_to = to.slice(0, 0, P - k, 2);
    const torch::Tensor test_from = from.slice(0, 1, P - k, 2), test_to = to.slice(0, 1, P - k, 2);
    const torch::Tensor M = torch::linalg::pinv(fit_from).matmul(fit_to);  // (C, C)
    out[k - 1] = (test_from.matmul(M) - test_to).norm() / test_to.norm().clamp_min(1e-300);
  }
  return out;
}

PositionGeometry position_geometry(GPT& model, int64_t max_positions, int64_t max_offset) {
  torch::NoGradGuard no_grad;
  const ModelConfig& c = model->config();
  const int64_t P = std::min(c.block_size, max_positions);
  PositionGeometry g;
  g.kind = name_of(c.pos_encoding);
  if (c.positions().rotates) {
    const RopeTables t = rope_tables(P, c.head_size());  // cos, sin (P, hs / 2)
    g.similarity = (t.cos.matmul(t.cos.t()) + t.sin.matmul(t.sin.t())).to(torch::kFloat64) /
                   static_cast<double>(c.head_size() / 2);
    return g;
  }
  if (model->transformer->h.front()->attn->has_score_bias()) {
    std::vector<torch::Tensor> layers;
    for (auto& block : model->transformer->h) {  // the last query's row, nearest key first
      layers.push_back(block->attn->score_bias(1, P).select(1, 0).flip(-1));  // (nh, P)
    }
    g.distance_bias = torch::stack(layers).to(torch::kFloat64);  // (L, nh, P)
    return g;
  }
  const torch::Tensor table = model->positions(P);  // (P, C), undefined without positions
  if (!table.defined()) return g;
  g.similarity = cosine_similarity_matrix(table.to(torch::kFloat64));
  g.shift_residual = linear_shift_residual(table, std::min(max_offset, P - 2));
  return g;
}

EmbeddingGeometry embedding_geometry(GPT& model, int64_t k) {
  torch::NoGradGuard no_grad;
  const torch::Tensor e = model->transformer->wte->weight.to(torch::kFloat64);  // (V, C)
  const int64_t V = e.size(0), kept = std::min<int64_t>(k, V - 1);
  const torch::Tensor unit = e / e.norm(2, 1, true).clamp_min(1e-300);
  EmbeddingGeometry g;
  std::vector<torch::Tensor> ids, sims;
  for (int64_t start = 0; start < V; start += 1024) {  // V x V in blocks of rows
    const int64_t end = std::min(V, start + 1024);
    torch::Tensor s = unit.slice(0, start, end).matmul(unit.t());  // (rows, V)
    s.scatter_(1, torch::arange(start, end).unsqueeze(1), -2.0);   // not its own neighbour
    const auto [values, indices] = s.topk(kept, 1);
    sims.push_back(values);
    ids.push_back(indices);
  }
  g.neighbours = torch::cat(ids);
  g.similarity = torch::cat(sims);
  // PCA from the C x C covariance: its top eigenvectors are the principal axes.
  const torch::Tensor centred = e - e.mean(0, true);
  const auto [values, vectors] = torch::linalg::eigh(centred.t().matmul(centred), "L");
  const int64_t C = values.size(0), n = std::min<int64_t>(2, C);
  const torch::Tensor top = vectors.slice(1, C - n, C).flip(1);  // largest first
  g.map = centred.matmul(top);
  g.explained = values.slice(0, C - n, C).flip(0) / values.sum().clamp_min(1e-300);
  return g;
}

Analogy embedding_analogy(GPT& model, int64_t a, int64_t b, int64_t c, int64_t k) {
  torch::NoGradGuard no_grad;
  const torch::Tensor e = model->transformer->wte->weight.to(torch::kFloat64);  // (V, C)
  const torch::Tensor unit = e / e.norm(2, 1, true).clamp_min(1e-300);
  const torch::Tensor target = e[b] - e[a] + e[c];
  torch::Tensor s = unit.matmul(target / target.norm().clamp_min(1e-300));  // (V,)
  for (const int64_t left_out : {a, b, c}) s[left_out] = -2.0;
  const auto left_out = static_cast<int64_t>(std::set<int64_t>{a, b, c}.size());
  const int64_t candidates = e.size(0) - left_out;
  if (candidates < 1) {
    throw std::invalid_argument("the vocabulary has " + std::to_string(e.size(0)) +
                                " token(s), all of them in the analogy: no other token can "
                                "answer it");
  }
  const auto [values, indices] = s.topk(std::min<int64_t>(k, candidates));
  return {indices, values};
}

}  // namespace tinylm
