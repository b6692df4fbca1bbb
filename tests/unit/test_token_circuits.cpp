// Token circuits: the top singular directions of a factored V x V matrix, on a worked example
// and against the dense matrix's SVD; and every head of a model given its directions.

#include <gtest/gtest.h>
#include <torch/torch.h>

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

TEST(TokenCircuits, EveryHeadHasItsDirections) {
  GPT model = test::random_model(test::small_config({"n_kv_head=1"}));
  const TokenCircuits c = token_circuits(model, 2);
  ASSERT_EQ(c.ov.size(), 2u);
  ASSERT_EQ(c.qk[1].size(), 2u);
  EXPECT_EQ(c.ov[1][1].left.sizes(), (std::vector<int64_t>{2, 11}));
  EXPECT_GE(c.qk[0][0].values[0].item<double>(), c.qk[0][0].values[1].item<double>());
}

}  // namespace
}  // namespace tinylm
