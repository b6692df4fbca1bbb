// Token circuits: the top singular directions of a factored V x V matrix, on a worked example
// and against the dense matrix's SVD; and every head of a model given its directions.

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/activation_cache.h"
#include "model/analysis/token_circuits.h"
#include "small_model.h"

namespace tinylm {
namespace {

TEST(TokenCircuits, WorkedExample) {
  // M = F G = [[3, 0, 0], [0, 0, 0], [4, 0, 0]]: one direction, sigma 5, reading tokens 0
  // and 2 in the ratio 3 : 4 and writing token 0.
  const torch::Tensor F = torch::tensor({3.0, 0.0, 4.0}, torch::kFloat64).view({3, 1});
  const torch::Tensor G = torch::tensor({1.0, 0.0, 0.0}, torch::kFloat64).view({1, 3});
  const SingularDirections d = top_singular_directions(F, G, 3);
  ASSERT_EQ(d.values.size(0), 1);
  EXPECT_NEAR(d.values[0].item<double>(), 5.0, 1e-12);
  EXPECT_NEAR(d.share[0].item<double>(), 1.0, 1e-12);
  EXPECT_TRUE(torch::allclose(d.left[0], torch::tensor({0.6, 0.0, 0.8}, torch::kFloat64)));
  EXPECT_TRUE(torch::allclose(d.right[0], torch::tensor({1.0, 0.0, 0.0}, torch::kFloat64)));
}

TEST(TokenCircuits, EqualTheDenseMatrixsSvd) {
  torch::manual_seed(5);
  const torch::Tensor F = torch::randn({9, 3}, torch::kFloat64),
                      G = torch::randn({3, 11}, torch::kFloat64);
  const torch::Tensor M = F.matmul(G);
  const SingularDirections d = top_singular_directions(F, G, 2);
  const auto [u, s, vh] = torch::linalg::svd(M, false, c10::nullopt);
  EXPECT_TRUE(torch::allclose(d.values, s.slice(0, 0, 2)));
  EXPECT_NEAR(d.share.sum().item<double>(),
              (s.slice(0, 0, 2).square().sum() / s.square().sum()).item<double>(), 1e-12);
  for (int64_t i = 0; i < 2; ++i) {
    EXPECT_NEAR(d.left[i].dot(u.select(1, i)).abs().item<double>(), 1.0, 1e-10);
    EXPECT_NEAR(d.right[i].dot(vh[i]).abs().item<double>(), 1.0, 1e-10);
    // The pair keeps the sign of M: u^T M v = sigma.
    EXPECT_NEAR(d.left[i].dot(M.matmul(d.right[i])).item<double>(), d.values[i].item<double>(),
                1e-10);
    EXPECT_GT(d.left[i][d.left[i].abs().argmax()].item<double>(), 0.0);
  }
}

TEST(TokenCircuits, EveryHeadsQkDirectionsAreThoseOfTheScoresItComputes) {
  // Without positions or biases, block 0's score of query token b on key token a is
  // q(e_b) . k(e_a) / sqrt(hs): run every pair (a, b) as a two-token text and the scores
  // spell out each head's dense QK matrix, which the factored directions must match.
  const int64_t V = 11;
  GPT model =
      test::random_model(test::small_config({"n_kv_head=1", "pos_encoding=none", "bias=false"}, V));
  const TokenCircuits c = token_circuits(model, 2);
  ASSERT_EQ(c.qk.size(), 2u);
  const torch::Tensor pairs = torch::stack(  // (V V, 2): row a V + b is [a, b]
      {torch::arange(V).repeat_interleave(V), torch::arange(V).repeat(V)}, 1);
  const CachedRun run = run_with_cache(model, pairs);
  const torch::Tensor scores = run.cache.at("blocks.0.attn.hook_scores");  // (V V, nh, 2, 2)
  for (int64_t h = 0; h < 2; ++h) {
    // M[b, a]: the query's token indexes rows, the key's columns.
    const torch::Tensor M =
        scores.select(1, h).select(1, 1).select(1, 0).view({V, V}).t().to(torch::kFloat64);
    const torch::Tensor s = std::get<1>(torch::linalg::svd(M, false, c10::nullopt));
    const SingularDirections& d = c.qk[0][static_cast<size_t>(h)];
    ASSERT_EQ(d.values.size(0), 2) << h;
    EXPECT_TRUE(torch::allclose(d.values, s.slice(0, 0, 2), 1e-4, 1e-5)) << h;
    for (int64_t i = 0; i < 2; ++i) {  // u^T M v = sigma: the pair reads M as the head does
      EXPECT_NEAR(d.left[i].dot(M.matmul(d.right[i])).item<double>(), d.values[i].item<double>(),
                  1e-4)
          << h;
    }
  }
  ASSERT_EQ(c.ov[1].size(), 2u);
  EXPECT_EQ(c.ov[1][1].left.sizes(), (std::vector<int64_t>{2, V}));
}

}  // namespace
}  // namespace tinylm
