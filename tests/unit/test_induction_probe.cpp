// The induction probe: repeated random tokens, and the two half losses it defines.

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "model/analysis/induction_probe.h"
#include "small_model.h"

namespace tinylm {
namespace {

using test::random_model;

TEST(InductionProbe, HalvesRepeatAndTokensAreDistinctWhenTheVocabularyAllows) {
  auto rng = at::make_generator<at::CPUGeneratorImpl>(9);
  const torch::Tensor probe = repeated_random_tokens(3, 10, 12, rng);  // (3, 20)
  ASSERT_EQ(probe.sizes().vec(), (std::vector<int64_t>{3, 20}));
  EXPECT_TRUE(torch::equal(probe.slice(1, 0, 10), probe.slice(1, 10, 20)));
  for (int64_t n = 0; n < 3; ++n) EXPECT_EQ(std::get<0>(torch::_unique(probe[n])).numel(), 10);
  const torch::Tensor wide = repeated_random_tokens(2, 30, 5, rng);  // more positions than tokens
  EXPECT_LT(wide.max().item<int64_t>(), 5);
}

TEST(InductionProbe, HalfLossesCountTheDocumentedPredictions) {
  // The reference: cross entropy of the whole probe's logits at the documented positions,
  // first half 0..R-2 (predicting 1..R-1), second half R..2R-2 (predicting R+1..2R-1).
  const int64_t R = 4;
  GPT model = random_model(test::one_head_config(2 * R, 6));
  const torch::Tensor probe = torch::tensor({{0, 1, 2, 3, 0, 1, 2, 3}, {5, 4, 3, 1, 5, 4, 3, 1}});
  const torch::Tensor logits = model->forward(probe).detach();  // (2, 2R, V)
  const auto mean_loss = [&](int64_t from, int64_t to) {
    const torch::Tensor l = logits.slice(1, from, to).reshape({-1, 6});
    return torch::cross_entropy_loss(l, probe.slice(1, from + 1, to + 1).reshape(-1))
        .item<double>();
  };
  const ProbeLosses losses = probe_losses(model, probe);
  EXPECT_NEAR(losses.first_half, mean_loss(0, R - 1), 1e-6);
  EXPECT_NEAR(losses.second_half, mean_loss(R, 2 * R - 1), 1e-6);
  // Position R-1 (predicting the repeat's start) is in neither half.
  EXPECT_GT(std::abs(losses.second_half - mean_loss(R - 1, 2 * R - 1)), 1e-4);
  EXPECT_GT(std::abs(losses.first_half - mean_loss(0, R)), 1e-4);
}

}  // namespace
}  // namespace tinylm
