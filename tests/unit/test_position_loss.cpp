// Loss by position and context drift, each against a second way to compute it: the windowed
// loss of one position at a time, and the mean over every pair of occurrences.

#include <ATen/CPUGeneratorImpl.h>

#include <gtest/gtest.h>
#include <torch/torch.h>
#include <limits>

#include "model/activation_cache.h"
#include "model/analysis/context_drift.h"
#include "model/analysis/position_loss.h"
#include "model/window_loss.h"
#include "small_model.h"

namespace tinylm {
namespace {

TEST(PositionLoss, EachPositionIsItsOwnWindowedLoss) {
  // Windows of 20 on a model of block 8 (rope extends), buckets of ceil(20 / 6) = 4.
  GPT model = test::random_model(test::small_config({"pos_encoding=rope"}));
  auto rng = at::make_generator<at::CPUGeneratorImpl>(5);
  const torch::Tensor windows = torch::randint(11, {5, 21}, rng, torch::kInt64);
  const PositionLoss p = loss_by_position(model, windows, /*max_buckets=*/6, /*batch=*/2);
  ASSERT_EQ(p.per_position.size(0), 20);
  EXPECT_EQ(p.windows, 5);
  for (int64_t t = 0; t < 20; ++t) {
    const WindowLoss w = window_loss(model, windows, 32, {t, t + 1});
    EXPECT_NEAR(p.per_position[t].item<double>(), w.mean(), 1e-5) << "position " << t;
  }
  EXPECT_TRUE(torch::equal(p.bucket_start, torch::tensor({0, 4, 8, 12, 16}, torch::kInt64)));
  EXPECT_NEAR(p.bucket_loss[1].item<double>(), p.per_position.slice(0, 4, 8).mean().item<double>(),
              1e-12);
}

// The mean cosine over every pair (i < j) of the rows of x, the O(n^2) way.
double pairwise_mean(const torch::Tensor& x) {
  const torch::Tensor u = x.to(torch::kFloat64) / x.to(torch::kFloat64).norm(2, 1, true);
  const torch::Tensor s = u.matmul(u.t());
  const int64_t n = x.size(0);
  return (s.sum().item<double>() - s.trace().item<double>()) / static_cast<double>(n * (n - 1));
}

TEST(ContextDrift, EveryStageIsTheMeanOverAllPairs) {
  GPT model = test::random_model(test::small_config({"pos_encoding=learned"}));
  const torch::Tensor windows = test::some_tokens();  // token 5 at (0, 1) and (0, 4); 3 twice
  const ContextDrift d = context_drift(model, windows, 3, /*batch=*/1);
  EXPECT_EQ(d.occurrences, 2);
  const std::vector<std::string> stages = {"embed", "blocks.0.hook_resid_pre",
                                           "blocks.0.hook_resid_post", "blocks.1.hook_resid_post"};
  EXPECT_EQ(d.stages, stages);
  EXPECT_NEAR(d.similarity[0], 1.0, 1e-12);  // one embedding row, twice
  const CachedRun run = run_with_cache(model, windows);
  const torch::Tensor where = (windows == 3).flatten();
  // The two sides run the float32 forward pass in different batches (one window at a time
  // against all at once), so their activations may differ by float32 rounding in each sum:
  // epsilon times the longest reduction (the MLP's 4C = 64), per layer (2), and a cosine
  // reads two such vectors. AVX2 and AVX-512 kernels differ here by 1e-8 to 3e-8.
  const double tolerance = 2 * 2 * 64 * std::numeric_limits<float>::epsilon();
  for (size_t s = 1; s < stages.size(); ++s) {
    const torch::Tensor x = run.cache.at(stages[s]).reshape({-1, 16});  // (B T, C)
    EXPECT_NEAR(d.similarity[s], pairwise_mean(x.index({where})), tolerance) << stages[s];
    EXPECT_NEAR(d.baseline[s], pairwise_mean(x), tolerance) << stages[s];
  }
  EXPECT_LT(d.similarity[1], 1.0 - 1e-3);  // learned positions already tell them apart
  const std::string e = test::error_of([&] { context_drift(model, windows, 6); });
  EXPECT_NE(e.find("token 6 occurs 0 times in 12 tokens of text"), std::string::npos) << e;
}

}  // namespace
}  // namespace tinylm
