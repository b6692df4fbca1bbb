#include "model/analysis/priors.h"

#include "model/analysis/head_factors.h"
#include "model/analysis/head_scores.h"
#include "model/attention.h"

namespace tinylm {

Priors head_priors(GPT& model, int64_t max_positions, int64_t max_vocab, bool ov_top1) {
  torch::NoGradGuard no_grad;
  const ModelConfig& c = model->config();
  const int64_t L = c.n_layer, nh = c.n_head, hs = c.head_size(), V = c.vocab_size;
  const int64_t P = std::min(c.block_size, max_positions);
  const torch::Tensor embedding = model->transformer->wte->weight;  // (V, C)
  const torch::Tensor positions = model->positions(P);              // (P, C) or undefined
  const torch::Tensor unembed = folded_unembedding(model);          // (C, V)

  std::vector<torch::Tensor> pos_scores, tok_scores, copying, top1;
  for (int64_t l = 0; l < L; ++l) {
    Block& block = model->transformer->h[l];
    if (positions.defined()) {
      const HeadProjections p = project_rows(block, positions);
      pos_scores.push_back(attention_scores(p.q, p.k, /*causal=*/true));  // (nh, P, P)
    } else if (block->attn->rotary() || block->attn->has_score_bias()) {
      // Positions inside attention act on content: the mean token embedding stands at every
      // position, then q and k are rotated there (rope) or the score bias is added
      // (relative, alibi). With x = 0, rope's q and k would be the biases alone (zero
      // without them): a uniform pattern that says nothing about the head.
      const HeadProjections p = project_rows(block, embedding.mean(0).expand({P, c.n_embd}));
      torch::Tensor q = p.q, k = p.k;  // (nh, P, hs)
      if (block->attn->rotary()) {
        q = apply_rope(q, block->attn->rope());
        k = apply_rope(k, block->attn->rope());
      }
      pos_scores.push_back(attention_scores(q, k, true, block->attn->score_bias(P, P)));
    }
    const HeadProjections e = project_rows(block, embedding);
    if (V <= max_vocab) tok_scores.push_back(attention_scores(e.q, e.k, /*causal=*/false));
    const torch::Tensor w_o = block->attn->c_proj->weight;  // (C, C): columns are heads' slots
    std::vector<float> layer_copying, layer_top1;
    for (int64_t h = 0; h < nh; ++h) {
      const torch::Tensor f = e.v[h].to(torch::kFloat64);  // (V, hs)
      const torch::Tensor g =
          w_o.slice(1, h * hs, (h + 1) * hs).t().matmul(unembed).to(torch::kFloat64);  // (hs, V)
      // M = f g has the nonzero eigenvalues of the small g f (hs x hs), and trace(M) = trace(g f).
      const torch::Tensor small = g.matmul(f);
      const double abs_sum = torch::linalg::eigvals(small).abs().sum().item<double>();
      layer_copying.push_back(abs_sum > 0 ? small.trace().item<double>() / abs_sum : 0.0);
      int64_t own_top = 0;
      for (int64_t start = 0; ov_top1 && start < V; start += 1024) {  // M by blocks of rows
        const int64_t end = std::min(V, start + 1024);
        const torch::Tensor best = f.slice(0, start, end).matmul(g).argmax(1);  // (rows,)
        own_top += (best == torch::arange(start, end, torch::kInt64)).sum().item<int64_t>();
      }
      layer_top1.push_back(static_cast<float>(own_top) / static_cast<float>(V));
    }
    copying.push_back(torch::tensor(layer_copying));
    top1.push_back(torch::tensor(layer_top1));
  }
  Priors priors;
  if (!pos_scores.empty()) {
    priors.position_scores = torch::stack(pos_scores);  // (L, nh, P, P)
    priors.position_pattern = torch::softmax(priors.position_scores, -1);
    const torch::Tensor target =
        target_matrix("previous_token", torch::zeros({1, P}, torch::kInt64));
    std::vector<torch::Tensor> prev;
    for (int64_t l = 0; l < L; ++l) {
      const ScoreSum s = score_sum(priors.position_pattern[l].unsqueeze(0), target);
      prev.push_back(s.sum / static_cast<double>(s.rows));
    }
    priors.position_previous_token = torch::stack(prev);  // (L, nh)
  }
  if (!tok_scores.empty()) priors.token_scores = torch::stack(tok_scores);
  priors.ov_copying = torch::stack(copying);
  if (ov_top1) priors.ov_top1 = torch::stack(top1);
  return priors;
}

}  // namespace tinylm
