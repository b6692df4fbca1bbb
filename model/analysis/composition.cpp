#include "model/analysis/composition.h"

#include <vector>

namespace tinylm {
namespace {

// Every head's matrices, float64, stacked over (layer, head): n = L nh.
struct HeadMatrices {
  torch::Tensor q, k, v;  // (n, C, hs): W_Q, W_K, W_V through ln_1's weight
  torch::Tensor o;        // (n, hs, C): W_O
};

HeadMatrices head_matrices(GPT& model) {
  const ModelConfig& c = model->config();
  const int64_t nh = c.n_head, hs = c.head_size(), C = c.n_embd, group = nh / c.kv_heads();
  std::vector<torch::Tensor> q, k, v, o;
  for (int64_t l = 0; l < c.n_layer; ++l) {
    Block& block = model->transformer->h[l];
    const torch::Tensor g = block->ln_1->weight.to(torch::kFloat64).unsqueeze(1);  // (C, 1)
    const torch::Tensor w = block->attn->c_attn->weight.to(torch::kFloat64);    // (C + 2 kv hs, C)
    const torch::Tensor w_o = block->attn->c_proj->weight.to(torch::kFloat64);  // (C, C)
    const int64_t k_rows = C, v_rows = C + c.kv_heads() * hs;
    for (int64_t h = 0; h < nh; ++h) {
      const int64_t kv = h / group;
      q.push_back(g * w.slice(0, h * hs, (h + 1) * hs).t());
      k.push_back(g * w.slice(0, k_rows + kv * hs, k_rows + (kv + 1) * hs).t());
      v.push_back(g * w.slice(0, v_rows + kv * hs, v_rows + (kv + 1) * hs).t());
      o.push_back(w_o.slice(1, h * hs, (h + 1) * hs).t());
    }
  }
  return {torch::stack(q), torch::stack(k), torch::stack(v), torch::stack(o)};
}

// Scores of every A against every B for W_B = X_B Y_B^T (X, Y (n, C, hs)), from hs x hs
// products only: with W_A = V_A O_A and M = O_A X_B,
//     ||W_A W_B||_F^2 = tr(M^T G_A M H_B),  G_A = V_A^T V_A,  H_B = Y_B^T Y_B,
//     ||W_B||_F^2 = tr((X_B^T X_B) H_B),      ||W_A||_F^2 = tr(G_A O_A O_A^T).
torch::Tensor scores(const HeadMatrices& m, const torch::Tensor& X, const torch::Tensor& Y,
                     const torch::Tensor& layer_of) {
  const int64_t n = X.size(0);
  const torch::Tensor G = m.v.transpose(1, 2).matmul(m.v);  // (n, hs, hs)
  const torch::Tensor H = Y.transpose(1, 2).matmul(Y);
  const torch::Tensor norm_a =
      (G * m.o.matmul(m.o.transpose(1, 2))).sum({1, 2}).clamp_min(0).sqrt();  // (n,)
  const torch::Tensor norm_b = (X.transpose(1, 2).matmul(X) * H).sum({1, 2}).clamp_min(0).sqrt();
  torch::Tensor out = torch::zeros({n, n}, torch::kFloat64);
  for (int64_t a = 0; a < n; ++a) {
    const torch::Tensor M = m.o[a].matmul(X);  // (n, hs, hs): O_A X_B for every B
    // tr(M^T G M H) = sum of (G M) * (M H), both symmetric factors.
    const torch::Tensor product = (G[a].matmul(M) * M.matmul(H)).sum({1, 2}).clamp_min(0).sqrt();
    out[a] = product / (norm_a[a] * norm_b);
  }
  const torch::Tensor later = layer_of.unsqueeze(1) < layer_of.unsqueeze(0);  // [A][B]
  return torch::where(later, torch::nan_to_num(out, 0.0), torch::zeros_like(out));
}

}  // namespace

CompositionScores composition_scores(GPT& model) {
  torch::NoGradGuard no_grad;
  const ModelConfig& c = model->config();
  const int64_t L = c.n_layer, nh = c.n_head;
  const HeadMatrices m = head_matrices(model);
  const torch::Tensor layer_of = torch::arange(L).repeat_interleave(nh);  // (n,)
  const torch::Tensor w_o_t = m.o.transpose(1, 2);                        // (n, C, hs)
  const auto shaped = [&](const torch::Tensor& t) { return t.view({L, nh, L, nh}); };
  return {shaped(scores(m, m.q, m.k, layer_of)),     // W_QK = W_Q W_K^T
          shaped(scores(m, m.k, m.q, layer_of)),     // W_QK^T = W_K W_Q^T
          shaped(scores(m, m.v, w_o_t, layer_of))};  // W_OV = W_V W_O
}

}  // namespace tinylm
