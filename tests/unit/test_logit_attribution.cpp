// Direct logit attribution: a worked example with exact values, and the parts adding up to the
// model's own logit for every kind of block.

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "model/analysis/logit_attribution.h"
#include "small_model.h"

namespace tinylm {
namespace {

TEST(LogitAttribution, WorkedExample) {
  // One head that attends uniformly (W_Q = W_K = 0) and passes its input through (W_V = W_O =
  // I), no positions, LayerNorms without bias; embeddings e0 = (1, 0), e1 = (0, 1), e2 =
  // (1, 1), tied. Tokens [0, 1], position 0: ln_1(e0) = (0.5, -0.5) r with r = 1 / sqrt(0.25 +
  // 1e-5), and that is the head's output h. The stream e0 + h centres to (0.5 + 0.5 r) (1, -1),
  // so ln_f's s = sqrt((0.5 + 0.5 r)^2 + 1e-5). Token 1 reads the second axis: the head adds
  // -0.5 r / s, the embedding -0.5 / s.
  GPT model(test::small_config(
      {"n_layer=1", "n_head=1", "n_embd=2", "attn_only=true", "bias=false", "pos_encoding=none"},
      3));
  {
    torch::NoGradGuard no_grad;
    model->transformer->wte->weight.copy_(
        torch::tensor({{1.0f, 0.0f}, {0.0f, 1.0f}, {1.0f, 1.0f}}));
    Block& block = model->transformer->h[0];
    block->attn->c_attn->weight.copy_(torch::cat({torch::zeros({4, 2}), torch::eye(2)}));
    block->attn->c_proj->weight.copy_(torch::eye(2));
  }
  const LogitAttribution a = logit_attribution(model, torch::tensor({0, 1}, torch::kInt64));
  const double r = 1.0 / std::sqrt(0.25 + 1e-5), s = std::sqrt(std::pow(0.5 + 0.5 * r, 2) + 1e-5);
  ASSERT_EQ(a.heads.sizes(), (std::vector<int64_t>{1, 1, 1}));
  EXPECT_EQ(a.targets[0].item<int64_t>(), 1);
  EXPECT_NEAR(a.heads[0][0][0].item<double>(), -0.5 * r / s, 1e-6);
  EXPECT_NEAR(a.embed[0].item<double>(), -0.5 / s, 1e-6);
  EXPECT_EQ(a.biases[0].item<double>(), 0.0);
  EXPECT_TRUE(std::isnan(a.mlps[0][0].item<double>()));
  EXPECT_NEAR(a.logits[0].item<double>(), -(0.5 + 0.5 * r) / s, 1e-6);
}

TEST(LogitAttribution, ThePartsAddUpToTheLogit) {
  for (const std::vector<std::string>& changes :
       {std::vector<std::string>{"block_size=8"},
        {"block_size=8", "norm=rmsnorm", "mlp=swiglu", "pos_encoding=rope"},
        {"block_size=8", "attn_only=true", "tie_weights=false", "n_kv_head=1"}}) {
    GPT model = test::random_model(test::small_config(changes));
    const LogitAttribution a =
        logit_attribution(model, torch::tensor({1, 5, 2, 9, 5, 0, 3}, torch::kInt64));
    const torch::Tensor total = a.embed + a.heads.sum({1, 2}) +
                                torch::nan_to_num(a.mlps, 0.0).sum(1) + a.biases;  // (T - 1,)
    EXPECT_EQ(total.size(0), 6);
    EXPECT_LT((total - a.logits).abs().max().item<double>(),
              1e-4 * a.logits.abs().max().item<double>())
        << total << a.logits;
    EXPECT_GT(a.heads.abs().max().item<double>(), 1e-3);  // no part hides behind a zero
  }
}

TEST(LogitAttribution, ATextOfOneTokenIsAnError) {
  GPT model = test::random_model(test::small_config());
  EXPECT_THROW(logit_attribution(model, torch::tensor({1}, torch::kInt64)), std::invalid_argument);
}

}  // namespace
}  // namespace tinylm
