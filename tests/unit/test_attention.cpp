// The attention formula against numbers worked out by hand, and its properties.

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/attention.h"
#include "small_model.h"

namespace tinylm {
namespace {

// The seed article's example: X = [[1,0],[0,1],[1,1]], W_Q = I, W_K = [[1,1],[0,1]],
// W_V = [[2,0],[0,1]], one head, d_k = 2, rows are tokens (q_i = x_i W_Q).
struct WorkedExample {
  torch::Tensor x = torch::tensor({{1.f, 0.f}, {0.f, 1.f}, {1.f, 1.f}}).unsqueeze(0);  // (1, 3, 2)
  torch::Tensor w_q = torch::eye(2);
  torch::Tensor w_k = torch::tensor({{1.f, 1.f}, {0.f, 1.f}});
  torch::Tensor w_v = torch::tensor({{2.f, 0.f}, {0.f, 1.f}});

  // The module with c_attn holding W_Q, W_K, W_V (nn.Linear stores W^T) and no output
  // projection (c_proj = I).
  CausalSelfAttention module() const {
    const ModelConfig c = test::small_config(
        {"n_layer=1", "n_head=1", "n_embd=2", "block_size=3", "bias=false"}, /*vocab_size=*/1);
    CausalSelfAttention attn(c, HookScope{}, 0);
    torch::NoGradGuard no_grad;
    attn->c_attn->weight.copy_(torch::cat({w_q.t(), w_k.t(), w_v.t()}, 0));
    attn->c_proj->weight.copy_(torch::eye(2));
    return attn;
  }
  // q, k, v as (B, nh, T, hs) through the module's own projection.
  std::vector<torch::Tensor> qkv() const {
    auto parts = module()->c_attn(x).split(2, 2);
    for (auto& p : parts) p = p.unsqueeze(1);
    return parts;
  }
};

void expect_near(const torch::Tensor& actual, std::vector<float> expected, double tol = 1e-6) {
  ASSERT_EQ(actual.numel(), static_cast<int64_t>(expected.size()));
  const torch::Tensor flat = actual.flatten();
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_NEAR(flat[static_cast<int64_t>(i)].item<float>(), expected[i], tol) << "entry " << i;
  }
}

TEST(Attention, WorkedExampleFullVisibility) {
  WorkedExample ex;
  const auto qkv = ex.qkv();
  const AttentionResult a = attention(qkv[0], qkv[1], qkv[2], /*causal=*/false);
  expect_near(a.pattern[0][0][1], {0.248255f, 0.248255f, 0.503490f});
  expect_near(a.z[0][0][1], {1.503490f, 0.751745f});
}

TEST(Attention, WorkedExampleCausal) {
  WorkedExample ex;
  const auto qkv = ex.qkv();
  const AttentionResult a = attention(qkv[0], qkv[1], qkv[2], /*causal=*/true);
  expect_near(a.pattern[0][0][1], {0.5f, 0.5f, 0.0f});
  expect_near(a.z[0][0][1], {1.0f, 0.5f});
  // The module end to end (c_proj = I) gives the same row.
  torch::NoGradGuard no_grad;
  expect_near(ex.module()->forward(ex.x)[0][1], {1.0f, 0.5f});
  // The first token sees only itself.
  expect_near(a.pattern[0][0][0], {1.0f, 0.0f, 0.0f});
}

TEST(Attention, SoftmaxIsShiftInvariant) {
  const torch::Tensor low = torch::softmax(torch::tensor({2.f, 1.f}), 0);
  const torch::Tensor high = torch::softmax(torch::tensor({102.f, 101.f}), 0);
  expect_near(low, {0.731059f, 0.268941f});
  expect_near(high, {0.731059f, 0.268941f});
}

TEST(Attention, ScoreGradientMatchesClosedForm) {
  // dL/ds_ij = a_ij g_i^T (v_j - o_i), with g_i = dL/do_i.
  torch::manual_seed(0);
  const auto q = torch::randn({1, 1, 5, 4}), k = torch::randn({1, 1, 5, 4});
  const auto v = torch::randn({1, 1, 5, 4}).requires_grad_(false);
  const auto q_leaf = q.clone().requires_grad_(true);
  AttentionResult a = attention(q_leaf, k, v, /*causal=*/true);
  a.scores.retain_grad();
  const torch::Tensor g = torch::randn({1, 1, 5, 4});
  (a.z * g).sum().backward();
  const torch::Tensor A = a.pattern[0][0].detach(), O = a.z[0][0].detach(), V = v[0][0],
                      G = g[0][0];
  for (int64_t i = 0; i < 5; ++i) {
    for (int64_t j = 0; j <= i; ++j) {  // masked entries have no gradient to compare
      const double expected = (A[i][j] * G[i].dot(V[j] - O[i])).item<double>();
      EXPECT_NEAR(a.scores.grad()[0][0][i][j].item<double>(), expected, 1e-5) << i << "," << j;
    }
  }
}

TEST(Attention, WithoutMaskPermutingRowsPermutesOutput) {
  torch::manual_seed(1);
  const auto x = torch::randn({1, 1, 6, 8});
  const auto w_q = torch::randn({8, 8}), w_k = torch::randn({8, 8}), w_v = torch::randn({8, 8});
  const auto run = [&](const torch::Tensor& input) {
    return attention(input.matmul(w_q), input.matmul(w_k), input.matmul(w_v), false).z;
  };
  const torch::Tensor perm = torch::tensor({3, 0, 5, 1, 4, 2}, torch::kInt64);
  const torch::Tensor permuted_out = run(x.index_select(2, perm));
  const torch::Tensor out_permuted = run(x).index_select(2, perm);
  EXPECT_TRUE(torch::allclose(permuted_out, out_permuted, 1e-5, 1e-5));
  // And the causal mask breaks the symmetry.
  const auto causal = [&](const torch::Tensor& input) {
    return attention(input.matmul(w_q), input.matmul(w_k), input.matmul(w_v), true).z;
  };
  EXPECT_FALSE(torch::allclose(causal(x.index_select(2, perm)), causal(x).index_select(2, perm),
                               1e-3, 1e-3));
}

TEST(Attention, PatternRowsSumToOneAndIgnoreTheFuture) {
  torch::manual_seed(2);
  const auto q = torch::randn({2, 3, 7, 4}), k = torch::randn({2, 3, 7, 4}),
             v = torch::randn({2, 3, 7, 4});
  const AttentionResult a = attention(q, k, v, true);
  EXPECT_TRUE(torch::allclose(a.pattern.sum(-1), torch::ones({2, 3, 7}), 1e-6, 1e-6));
  EXPECT_EQ(a.pattern.triu(1).abs().max().item<float>(), 0.0f);
}

}  // namespace
}  // namespace tinylm
