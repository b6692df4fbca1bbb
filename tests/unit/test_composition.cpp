// Composition scores: a worked example with exact values (and ln_1's weight folded in), and
// the factored computation against the C x C matrices multiplied out.

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "model/analysis/composition.h"
#include "small_model.h"

namespace tinylm {
namespace {

// Two layers of one head, 2 wide: head 0.0 reads and writes the first axis only (W_OV =
// diag(1, 0)); head 1.0 has W_Q = W_K = I (W_QK = I) and W_OV = diag(0, 1).
GPT worked_model() {
  GPT model(test::small_config({"n_layer=2", "n_head=1", "n_embd=2", "bias=false"}));
  torch::NoGradGuard no_grad;
  const torch::Tensor I = torch::eye(2), first = torch::diag(torch::tensor({1.0f, 0.0f})),
                      second = torch::diag(torch::tensor({0.0f, 1.0f}));
  Block& a = model->transformer->h[0];
  Block& b = model->transformer->h[1];
  // c_attn rows: q (2), k (2), v (2); x W^T, so a row block is W^T in the row-vector convention.
  a->attn->c_attn->weight.copy_(torch::cat({I, I, first}));
  b->attn->c_attn->weight.copy_(torch::cat({I, I, second}));
  a->attn->c_proj->weight.copy_(I);
  b->attn->c_proj->weight.copy_(I);
  return model;
}

TEST(Composition, WorkedExample) {
  GPT model = worked_model();
  const CompositionScores s = composition_scores(model);
  // Q and K: ||diag(1,0) I||_F / (||diag(1,0)||_F ||I||_F) = 1 / sqrt(2). V: diag(1,0) diag(0,1) =
  // 0.
  EXPECT_NEAR(s.q[0][0][1][0].item<double>(), 1.0 / std::sqrt(2.0), 1e-12);
  EXPECT_NEAR(s.k[0][0][1][0].item<double>(), 1.0 / std::sqrt(2.0), 1e-12);
  EXPECT_EQ(s.v[0][0][1][0].item<double>(), 0.0);
  // A later head does not compose into an earlier one, nor a head into its own layer.
  EXPECT_EQ(s.q[1][0][0][0].item<double>(), 0.0);
  EXPECT_EQ(s.k[0][0][0][0].item<double>(), 0.0);
}

TEST(Composition, TheReadingHeadsNormWeightIsFoldedIn) {
  GPT model = worked_model();
  {
    torch::NoGradGuard no_grad;
    model->transformer->h[1]->ln_1->weight.copy_(torch::tensor({2.0f, 1.0f}));
  }
  // W_Q = W_K = diag(2, 1): W_QK = diag(4, 1); diag(1,0) diag(4,1) = diag(4, 0): 4 / sqrt(17).
  const CompositionScores s = composition_scores(model);
  EXPECT_NEAR(s.q[0][0][1][0].item<double>(), 4.0 / std::sqrt(17.0), 1e-12);
  EXPECT_NEAR(s.k[0][0][1][0].item<double>(), 4.0 / std::sqrt(17.0), 1e-12);
  // W_V = diag(2, 1) diag(0, 1) = diag(0, 1): still orthogonal to what 0.0 writes.
  EXPECT_EQ(s.v[0][0][1][0].item<double>(), 0.0);
}

// The definition multiplied out: C x C matrices, float64.
double dense_score(const torch::Tensor& w_a, const torch::Tensor& w_b) {
  return (w_a.matmul(w_b).norm() / (w_a.norm() * w_b.norm())).item<double>();
}

TEST(Composition, EqualsTheMatricesMultipliedOut) {
  for (const std::vector<std::string>& changes :
       {std::vector<std::string>{"n_layer=3", "n_head=2"},
        {"n_layer=3", "n_head=4", "n_kv_head=2", "norm=rmsnorm"}}) {
    GPT model = test::random_model(test::small_config(changes));
    const CompositionScores s = composition_scores(model);
    const ModelConfig& c = model->config();
    const int64_t nh = c.n_head, hs = c.head_size(), C = c.n_embd, group = nh / c.kv_heads();
    // Row-vector W_Q, W_K, W_V (C, hs) through ln_1, and W_O (hs, C), of head (l, h).
    const auto w = [&](int64_t l, int64_t h, int which) {
      Block& block = model->transformer->h[l];
      const torch::Tensor g = torch::diag(block->ln_1->weight.to(torch::kFloat64));
      const torch::Tensor c_attn = block->attn->c_attn->weight.to(torch::kFloat64);
      const int64_t start =
          which == 0 ? h * hs : C + (which - 1) * c.kv_heads() * hs + (h / group) * hs;
      return g.matmul(c_attn.slice(0, start, start + hs).t());
    };
    const auto w_o = [&](int64_t l, int64_t h) {
      return model->transformer->h[l]
          ->attn->c_proj->weight.to(torch::kFloat64)
          .slice(1, h * hs, (h + 1) * hs)
          .t();
    };
    for (int64_t la = 0; la < c.n_layer; ++la)
      for (int64_t ha = 0; ha < nh; ++ha)
        for (int64_t lb = 0; lb < c.n_layer; ++lb)
          for (int64_t hb = 0; hb < nh; ++hb) {
            const torch::Tensor ov_a = w(la, ha, 2).matmul(w_o(la, ha));
            const torch::Tensor qk_b = w(lb, hb, 0).matmul(w(lb, hb, 1).t());
            const torch::Tensor ov_b = w(lb, hb, 2).matmul(w_o(lb, hb));
            const bool later = la < lb;
            EXPECT_NEAR(s.q[la][ha][lb][hb].item<double>(), later ? dense_score(ov_a, qk_b) : 0.0,
                        1e-10);
            EXPECT_NEAR(s.k[la][ha][lb][hb].item<double>(),
                        later ? dense_score(ov_a, qk_b.t()) : 0.0, 1e-10);
            EXPECT_NEAR(s.v[la][ha][lb][hb].item<double>(), later ? dense_score(ov_a, ov_b) : 0.0,
                        1e-10);
          }
  }
}

}  // namespace
}  // namespace tinylm
