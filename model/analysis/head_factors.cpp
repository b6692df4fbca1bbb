#include "model/analysis/head_factors.h"

namespace tinylm {

HeadProjections project_rows(Block& block, const torch::Tensor& x) {
  CausalSelfAttention& attn = block->attn;
  const auto h = attn->project(block->ln_1(x).unsqueeze(0));  // (1, n, N, hs) each
  return {h.q[0], attn->expand_kv(h.k)[0], attn->expand_kv(h.v)[0]};
}

torch::Tensor folded_unembedding(GPT& model) {
  const int64_t C = model->config().n_embd;
  const torch::Tensor centre = model->transformer->ln_f->centres()
                                   ? torch::eye(C) - 1.0 / static_cast<double>(C)
                                   : torch::eye(C);
  return centre.matmul(torch::diag(model->transformer->ln_f->weight))
      .matmul(model->unembedding().t());
}

}  // namespace tinylm
