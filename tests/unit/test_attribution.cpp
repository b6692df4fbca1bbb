// The fast paths of ablation and patching against their references: cached, batched exact
// ablation against one whole forward pass per ablated head; attribution's gradients against
// central finite differences in float64; the top-K choice; rank agreement's worked example.
// (PyTorch checks the same numbers in tests/attribution_reference.py.)

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "model/activation_cache.h"
#include "model/analysis/ablation.h"
#include "model/analysis/activation_patching.h"
#include "model/analysis/induction_probe.h"
#include "model/analysis/rank_agreement.h"
#include "model/analysis/window_survey.h"
#include "model/window_loss.h"
#include "small_model.h"

namespace tinylm {
namespace {

torch::Tensor random_tokens(int64_t rows, int64_t length, int64_t vocab, uint64_t seed) {
  auto rng = at::make_generator<at::CPUGeneratorImpl>(seed);
  return torch::randint(vocab, {rows, length}, rng, torch::kInt64);
}

// Every block option an ablation passes through: MLP kinds, norms, position encodings (a
// score bias, rotation), grouped-query attention, attention alone.
const std::vector<std::vector<std::string>>& block_options() {
  static const std::vector<std::vector<std::string>> options = {
      {},
      {"pos_encoding=rope", "norm=rmsnorm", "mlp=swiglu", "n_head=4", "n_kv_head=2"},
      {"pos_encoding=relative", "num_buckets=4", "max_distance=6"},
      {"pos_encoding=alibi", "attn_only=true", "n_layer=3"}};
  return options;
}

TEST(Attribution, CachedBatchedAblationEqualsAWholeForwardPassPerHead) {
  for (const auto& option : block_options()) {
    SCOPED_TRACE(::testing::PrintToString(option));
    GPT model = test::random_model(test::small_config(option));
    const ModelConfig& c = model->config();
    const torch::Tensor windows = random_tokens(5, c.block_size + 1, c.vocab_size, 1);
    auto rng = at::make_generator<at::CPUGeneratorImpl>(2);
    const torch::Tensor probe = repeated_random_tokens(3, c.block_size / 2, c.vocab_size, rng);
    const AblationTable table = ablation_table(model, windows, probe, /*exact=*/-1);
    ASSERT_EQ(table.heads.size(), static_cast<size_t>(c.n_layer * c.n_head));

    // The reference: each head ablated by a hook, each loss from a whole forward pass.
    const torch::Tensor means = mean_head_outputs(model, windows.slice(1, 0, c.block_size));
    const double loss = window_loss(model, windows).mean();
    const double probe_loss = probe_losses(model, probe).second_half;
    EXPECT_NEAR(table.loss, loss, 1e-6);
    EXPECT_NEAR(table.probe_loss, probe_loss, 1e-6);
    for (const HeadAblation& row : table.heads) {
      ASSERT_TRUE(row.exact);
      for (const bool zero : {true, false}) {
        const HookHandle ablated =
            zero ? ablate_head(model, row.head)
                 : ablate_head(model, row.head, means[row.head.layer][row.head.head]);
        EXPECT_NEAR(zero ? row.zero : row.mean, window_loss(model, windows).mean() - loss, 1e-5)
            << row.head.label();
        EXPECT_NEAR(zero ? row.probe_zero : row.probe_mean,
                    probe_losses(model, probe).second_half - probe_loss, 1e-5)
            << row.head.label();
      }
    }
  }
}

TEST(Attribution, AblationRunsExactlyTheTopKHeadsByTheirLargestEstimate) {
  GPT model = test::random_model(test::small_config({"n_head=4"}));
  const torch::Tensor windows = random_tokens(4, 9, 11, 3);
  auto rng = at::make_generator<at::CPUGeneratorImpl>(4);
  const torch::Tensor probe = repeated_random_tokens(2, 4, 11, rng);
  const AblationTable all = ablation_table(model, windows, probe, -1);
  const AblationTable three = ablation_table(model, windows, probe, 3);
  const auto reach = [](const AblationEstimate& e) {
    return std::max(
        {std::abs(e.zero), std::abs(e.mean), std::abs(e.probe_zero), std::abs(e.probe_mean)});
  };
  std::vector<double> reaches;
  for (const HeadAblation& r : all.heads) reaches.push_back(reach(r.estimate));
  std::sort(reaches.rbegin(), reaches.rend());
  int exact = 0;
  for (const HeadAblation& r : three.heads) {
    if (!r.exact) {
      EXPECT_TRUE(std::isnan(r.zero));
      EXPECT_LT(reach(r.estimate), reaches[2] + 1e-12) << r.head.label();
      continue;
    }
    ++exact;
    EXPECT_GE(reach(r.estimate), reaches[2] - 1e-12) << r.head.label();
    for (const HeadAblation& a : all.heads) {  // the same numbers as when all are run
      if (a.head.label() == r.head.label()) {
        EXPECT_NEAR(a.zero, r.zero, 1e-6);
      }
    }
  }
  EXPECT_EQ(exact, 3);
  EXPECT_TRUE(three.heads[0].exact && three.heads[2].exact && !three.heads[3].exact);
  EXPECT_EQ(ablation_table(model, windows, probe, 0).heads[0].exact, false);
}

// The loss of `inputs` with head (l, h)'s z scaled by 1 + eps.
double scaled_head_loss(GPT& model, const torch::Tensor& windows, int64_t l, int64_t h,
                        double eps) {
  const HookHandle scale = model->add_hook(hook_name(l, "attn.hook_z"),
                                           [h, eps](const torch::Tensor& z, const std::string&) {
                                             torch::Tensor out = z.clone();
                                             out.select(1, h).mul_(1.0 + eps);
                                             return out;
                                           });
  return window_loss(model, windows).mean();
}

TEST(Attribution, TheGradientOfTheLossAlongEachHeadEqualsFiniteDifferences) {
  // d loss / d eps of z_h (1 + eps) is sum g . z_h: the zero-ablation estimate's negative.
  for (const auto& option : block_options()) {
    SCOPED_TRACE(::testing::PrintToString(option));
    GPT model = test::random_model(test::small_config(option));
    model->to(torch::kFloat64);
    const ModelConfig& c = model->config();
    const torch::Tensor windows = random_tokens(3, c.block_size + 1, c.vocab_size, 5);
    const int64_t T = c.block_size;
    SurveyOptions o;
    o.attribution = true;
    const WindowSurvey s =
        survey_windows(model, windows.slice(1, 0, T), windows.slice(1, 1, T + 1), o);
    const double eps = 1e-5;
    for (int64_t l = 0; l < c.n_layer; ++l) {
      for (int64_t h = 0; h < c.n_head; ++h) {
        const double fd = (scaled_head_loss(model, windows, l, h, eps) -
                           scaled_head_loss(model, windows, l, h, -eps)) /
                          (2 * eps);
        // Central differences in float64: error ~ eps^2 f''' + 1e-16 / eps.
        EXPECT_NEAR(s.grad_dot_z[l][h].item<double>(), fd, 1e-8) << l << "." << h;
      }
    }
  }
}

TEST(Attribution, PatchingsEstimatesAreTheSlopeOfTheLogitDifference) {
  // Moving a site from the corrupted run's value towards the clean one by alpha changes LD by
  // alpha x estimate x span, to first order: the central difference at alpha = 0.
  GPT model = test::random_model(test::small_config());
  {
    torch::NoGradGuard no_grad;  // predictions that turn on the tokens, as a trained model's
    for (auto& p : model->parameters()) p.mul_(3.0);
  }
  model->to(torch::kFloat64);
  const torch::Tensor clean = torch::tensor({1, 5, 2, 9, 5, 0, 3, 7}, torch::kInt64);
  PatchingResult r;
  torch::Tensor corrupt;
  // One token changed, from the third on, until the answer differs.
  for (int64_t v = 2 * 11; v < 8 * 11 && !r.heads.defined(); ++v) {
    corrupt = clean.clone();
    corrupt[v / 11] = v % 11;
    try {
      r = activation_patching(model, clean, corrupt, 7);
    } catch (const std::invalid_argument&) {  // the same answer: try the next one
    }
  }
  ASSERT_TRUE(r.heads.defined());
  const double span = r.clean_diff - r.corrupt_diff;
  torch::NoGradGuard no_grad;
  const CachedRun clean_run =
      run_with_cache(model, clean.unsqueeze(0), names_ending_with("hook_z"));
  const CachedRun corrupt_run =
      run_with_cache(model, corrupt.unsqueeze(0), names_ending_with("hook_z"));
  const auto ld = [&](int64_t l, int64_t h, int64_t p, double alpha) {
    const std::string name = hook_name(l, "attn.hook_z");
    const torch::Tensor towards = clean_run.cache.at(name) - corrupt_run.cache.at(name);
    const HookHandle move = model->add_hook(name, [&](const torch::Tensor& z, const std::string&) {
      torch::Tensor out = z.clone();
      out.select(1, h).select(1, p).add_(alpha * towards.select(1, h).select(1, p));
      return out;
    });
    const torch::Tensor logits = model->forward(corrupt.unsqueeze(0));
    return (logits[0][7][r.clean_answer] - logits[0][7][r.corrupt_answer]).item<double>();
  };
  const double eps = 1e-5;
  for (int64_t l = 0; l < 2; ++l) {
    for (int64_t h = 0; h < 2; ++h) {
      for (int64_t p = 0; p < 8; ++p) {
        const double slope = (ld(l, h, p, eps) - ld(l, h, p, -eps)) / (2 * eps) / span;
        EXPECT_NEAR(r.head_positions_estimate[l][h][p].item<double>(), slope, 1e-7)
            << l << "." << h << " at " << p;
      }
    }
  }
  EXPECT_NEAR(r.heads_estimate.sum().item<double>(), r.head_positions_estimate.sum().item<double>(),
              1e-12);

  // Exact runs of the layers' outputs alone: the same numbers as among every site's.
  const PatchingResult layers =
      activation_patching(model, clean, corrupt, 7, 64, token_number, ExactPatching::kLayerOutputs);
  EXPECT_TRUE(torch::allclose(layers.attn_out, r.attn_out, 0, 1e-12));
  EXPECT_TRUE(torch::allclose(layers.mlp_out, r.mlp_out, 0, 1e-12));
  EXPECT_GT(r.attn_out.abs().sum().item<double>(), 0.0);
  EXPECT_EQ(layers.heads.abs().sum().item<double>(), 0.0);  // not run
}

TEST(Attribution, RankAgreementWorkedExample) {
  // exact ranks 4 1 3 2 (ascending 1..4), estimate ranks 4 2 3 1: d^2 = 0 1 0 1, so
  // Spearman = 1 - 6 x 2 / (4 x 15) = 0.8. Top 2 by exact: items 0, 2; by estimate: 0, 2.
  const RankAgreement a = rank_agreement({0.9, 0.1, 0.5, 0.3}, {0.8, 0.2, 0.4, 0.1}, 2);
  EXPECT_NEAR(a.spearman, 0.8, 1e-12);
  EXPECT_EQ(a.k, 2);
  EXPECT_EQ(a.both, (std::vector<int64_t>{0, 2}));
  // Ties share their mean rank; NaN items are left out; a constant side has no correlation.
  EXPECT_NEAR(rank_agreement({1, 2, 3, std::nan("")}, {1, 1, 2, 5}, 1).spearman, std::sqrt(0.75),
              1e-12);
  EXPECT_TRUE(std::isnan(rank_agreement({1, 2, 3}, {4, 4, 4}, 1).spearman));
  EXPECT_EQ(rank_agreement({3, 2, 1}, {1, 2, 3}, 1).both, std::vector<int64_t>{});
}

}  // namespace
}  // namespace tinylm
