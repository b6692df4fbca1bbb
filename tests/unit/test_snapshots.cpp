// Snapshots of the heads: their schedule, the mean attention distance and the formation step
// on worked examples, a snapshot equal to the analyses it gathers, and its file read back.

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "model/activation_cache.h"
#include "model/analysis/head_scores.h"
#include "model/analysis/head_snapshot.h"
#include "model/analysis/priors.h"
#include "small_model.h"
#include "test_util.h"
#include "train/run/snapshots.h"

namespace tinylm {
namespace {

TEST(Snapshots, AreTakenAtLogSpacedStepsEvalsAndTheEnd) {
  std::vector<int64_t> steps;
  for (int64_t s = 0; s <= 2500; ++s)
    if (is_snapshot_step(s, /*eval_interval=*/1000, /*max_iters=*/2500)) steps.push_back(s);
  EXPECT_EQ(steps, (std::vector<int64_t>{0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 2500}));
}

TEST(Snapshots, MeanAttentionDistanceWorkedExamples) {
  const int64_t T = 5;
  // Previous-token: every row but the first reads one back: (0 + 1 + 1 + 1 + 1) / 5.
  torch::Tensor previous = torch::zeros({1, 1, T, T});
  previous[0][0][0][0] = 1;
  for (int64_t i = 1; i < T; ++i) previous[0][0][i][i - 1] = 1;
  EXPECT_NEAR(mean_attention_distance(previous)[0].item<double>(), 4.0 / 5.0, 1e-12);
  // Uniform over j <= i: row i's mean distance is i / 2, so (0 + 1 + 2 + 3 + 4) / 2 / 5 = 1.
  const torch::Tensor uniform =
      torch::tril(torch::ones({T, T})) / torch::arange(1, T + 1).unsqueeze(1);
  EXPECT_NEAR(mean_attention_distance(uniform.view({1, 1, T, T}))[0].item<double>(), 1.0, 1e-7);
}

TEST(Snapshots, AHeadFormsWhenItsScoreFirstCrossesHalfItsLast) {
  // Three heads over steps 0, 10, 100, 1000: one rises to 0.8 (half, 0.4, first reached at
  // 100); one never rises above 0; one starts at 0.3 and ends at 0.5, above half from the
  // start: it never crossed, so it did not form.
  const torch::Tensor scores =
      torch::tensor({0.0, 0.1, 0.5, 0.8, 0.0, -0.1, 0.0, -0.2, 0.3, 0.2, 0.4, 0.5}).view({3, 4});
  const torch::Tensor formed = formation_steps({0, 10, 100, 1000}, scores.t().reshape({4, 1, 3}));
  EXPECT_EQ(formed[0][0].item<double>(), 100.0);
  EXPECT_TRUE(std::isnan(formed[0][1].item<double>()));
  EXPECT_TRUE(std::isnan(formed[0][2].item<double>()));
}

TEST(Snapshots, HoldWhatTheAnalysesComputeAndReadBack) {
  GPT model = test::random_model(test::small_config({"block_size=8"}));
  const torch::Tensor text = torch::tensor({1, 5, 2, 9, 5, 0, 3, 3}, torch::kInt64);
  const torch::Tensor probe = torch::tensor({4, 7, 1, 8, 4, 7, 1, 8}, torch::kInt64);
  const HeadSnapshot s = snapshot_heads(model, text, probe);
  const CachedRun run = run_with_cache(model, text.unsqueeze(0));
  EXPECT_TRUE(torch::allclose(s.text_pattern[1], run.cache.at("blocks.1.attn.hook_pattern")[0]));
  const ScoreSum prev = score_sum(run.cache.at("blocks.1.attn.hook_pattern"),
                                  target_matrix("previous_token", text.unsqueeze(0)));
  EXPECT_TRUE(torch::allclose(s.previous_token[1], prev.sum / static_cast<double>(prev.rows)));
  EXPECT_TRUE(
      torch::allclose(s.ov_copying, head_priors(model).ov_copying.to(s.ov_copying.dtype())));
  // Induction on the probe's repeat, by hand: row i (4..7) reads the token after the earlier
  // copy of its own, at i - 3.
  const CachedRun probe_run = run_with_cache(model, probe.unsqueeze(0));
  for (int64_t l = 0; l < 2; ++l) {
    const torch::Tensor a = probe_run.cache.at(hook_name(l, "attn.hook_pattern"))[0];  // (nh, T, T)
    for (int64_t h = 0; h < 2; ++h) {
      double sum = 0.0;
      for (int64_t i = 4; i < 8; ++i) sum += a[h][i][i - 3].item<double>();
      EXPECT_NEAR(s.induction[l][h].item<double>(), sum / 4, 1e-6) << l << " " << h;
    }
  }

  test::TempDir dir;
  save_snapshot(dir.path(), 7, s, text, probe);
  const std::vector<StoredSnapshot> back = load_snapshots(dir.path());
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].step, 7);
  EXPECT_TRUE(torch::equal(back[0].text, text));
  // Patterns are stored as float16: within its half-unit in the last place near 1.
  EXPECT_LT((back[0].heads.probe_pattern - s.probe_pattern).abs().max().item<double>(), 5e-4);
  EXPECT_TRUE(torch::equal(back[0].heads.entropy, s.entropy.to(torch::kFloat32)));
  EXPECT_TRUE(load_snapshots(dir.path() / "elsewhere").empty());
}

}  // namespace
}  // namespace tinylm
