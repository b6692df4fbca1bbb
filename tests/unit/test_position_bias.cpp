// Positions as a score bias (model/position_bias.h): ALiBi's slopes against the paper's
// formula, T5's buckets and bias against values worked out by hand, the bias inside the
// model's hook_scores, gradients into the learned table, and windows past block_size.

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <map>
#include <vector>

#include "model/activation_cache.h"
#include "model/analysis/priors.h"
#include "model/gpt.h"
#include "model/position_bias.h"
#include "small_model.h"

namespace tinylm {
namespace {

TEST(PositionBias, AlibiSlopesFollowThePapersFormula) {
  // A power of two: 2^(-8 h / n).
  const std::vector<double> four = alibi_slopes(4);
  const std::vector<double> expect_four = {0.25, 0.0625, 0.015625, 0.00390625};
  EXPECT_EQ(four, expect_four);
  // 6 heads: the 4 of n' = 4, then the 1st and 3rd of the 8 of 2 n' = 8 (2^-1, 2^-3).
  const std::vector<double> six = alibi_slopes(6);
  const std::vector<double> expect_six = {0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125};
  EXPECT_EQ(six, expect_six);
  const std::vector<double> eight = alibi_slopes(8);
  for (int h = 1; h <= 8; ++h) EXPECT_EQ(eight[h - 1], std::exp2(-h)) << h;
  EXPECT_EQ(alibi_slopes(1), std::vector<double>{1.0 / 256});
}

TEST(PositionBias, T5BucketsByHand) {
  // 8 buckets, max_distance 32: d < 4 exact; beyond, bucket 4 + floor(log(d / 4) / log(8) * 4),
  // so 5 from d >= 4 * 8^(1/4) = 6.73, 6 from 4 * 8^(1/2) = 11.3, 7 from 4 * 8^(3/4) = 19.03.
  const std::map<int64_t, int64_t> expected = {{0, 0},  {1, 1},  {3, 3},  {4, 4},  {6, 4},
                                               {7, 5},  {11, 5}, {12, 6}, {19, 6}, {20, 7},
                                               {31, 7}, {32, 7}, {500, 7}};
  for (const auto& [d, bucket] : expected) {
    EXPECT_EQ(relative_bucket(d, 8, 32), bucket) << "distance " << d;
  }
  EXPECT_EQ(relative_bucket(-3, 8, 32), 0);  // the future: masked, bucket 0
}

TEST(PositionBias, DistancesOfACachedWindow) {
  // Two queries at the last two of four positions: rows are i - j, clamped at 0.
  const torch::Tensor d = query_key_distances(2, 4);
  EXPECT_TRUE(torch::equal(d, torch::tensor({{2, 1, 0, 0}, {3, 2, 1, 0}}, torch::kInt64)));
}

// A model whose q and k are zero: every score is the position bias alone.
GPT contentless_model(const std::string& positions, int64_t block_size) {
  GPT model = test::random_model(test::small_config({"pos_encoding=" + positions, "n_head=2",
                                                     "block_size=" + std::to_string(block_size),
                                                     "num_buckets=8", "max_distance=32"}));
  torch::NoGradGuard no_grad;
  for (auto& block : model->transformer->h) {
    block->attn->c_attn->weight.narrow(0, 0, 2 * 16).zero_();  // the q and k rows
    block->attn->c_attn->bias.narrow(0, 0, 2 * 16).zero_();
  }
  return model;
}

TEST(PositionBias, RelativeScoresAreTheTableAtEachBucket) {
  const int64_t T = 24;
  GPT model = contentless_model("relative", T);
  torch::NoGradGuard no_grad;
  torch::Tensor& w = model->transformer->h[1]->attn->rel_bias->weight;  // (nh 2, buckets 8)
  ASSERT_EQ(w.sizes().vec(), (std::vector<int64_t>{2, 8}));
  w.copy_(torch::tensor({{0.f, 1.f, 2.f, 3.f, 4.f, 5.f, 6.f, 7.f},
                         {-0.5f, -1.f, -1.5f, -2.f, -2.5f, -3.f, -3.5f, -4.f}}));
  const torch::Tensor tokens = torch::randint(11, {1, T}, torch::kInt64);
  const CachedRun run =
      run_with_cache(model, tokens, names_ending_with("blocks.1.attn.hook_scores"));
  const torch::Tensor s = run.cache.at("blocks.1.attn.hook_scores")[0];  // (nh, T, T)
  for (int64_t h = 0; h < 2; ++h) {
    for (int64_t i = 0; i < T; ++i) {
      for (int64_t j = 0; j < T; ++j) {
        const float got = s[h][i][j].item<float>();
        if (j > i) {
          EXPECT_TRUE(std::isinf(got) && got < 0) << i << "," << j;
          continue;
        }
        const float want = h == 0 ? static_cast<float>(relative_bucket(i - j, 8, 32))
                                  : -0.5f * static_cast<float>(relative_bucket(i - j, 8, 32) + 1);
        ASSERT_EQ(got, want) << "head " << h << " query " << i << " key " << j;
      }
    }
  }
}

TEST(PositionBias, AlibiScoresAreMinusSlopeTimesDistance) {
  const int64_t T = 10;
  GPT model = contentless_model("alibi", T);
  const torch::Tensor tokens = torch::randint(11, {1, T}, torch::kInt64);
  const CachedRun run = run_with_cache(model, tokens, names_ending_with("attn.hook_scores"));
  const torch::Tensor s = run.cache.at("blocks.0.attn.hook_scores")[0];  // (nh, T, T)
  const std::vector<double> slopes = {1.0 / 16, 1.0 / 256};              // 2 heads
  for (int64_t h = 0; h < 2; ++h) {
    for (int64_t i = 0; i < T; ++i) {
      for (int64_t j = 0; j <= i; ++j) {
        EXPECT_EQ(s[h][i][j].item<float>(), static_cast<float>(-slopes[h] * (i - j)));
      }
    }
  }
  // Slopes are fixed: nothing for the optimizer.
  for (const auto& item : model->named_parameters())
    EXPECT_EQ(item.key().find("alibi"), std::string::npos);
}

TEST(PositionBias, ThePositionPriorIsTheBias) {
  // Priors read positions from x = 0: with q and k zero, the scores are the bias itself.
  GPT model = contentless_model("alibi", 8);
  const Priors priors = head_priors(model);
  ASSERT_TRUE(priors.position_scores.defined());
  for (int64_t i = 0; i < 8; ++i) {
    for (int64_t j = 0; j <= i; ++j) {
      EXPECT_EQ(priors.position_scores[1][0][i][j].item<float>(),
                static_cast<float>(-(i - j) / 16.0));
    }
  }
}

TEST(PositionBias, TheLearnedTableGetsTheGradientOfItsBuckets) {
  // d loss / d W[h, b] by central differences in float64, against autograd.
  GPT model = test::random_model(
      test::small_config({"pos_encoding=relative", "num_buckets=4", "max_distance=6"}));
  model->to(torch::kFloat64);
  const torch::Tensor x = test::some_tokens();
  const auto loss = [&] {
    const torch::Tensor logits = model->forward(x);
    return torch::nn::functional::cross_entropy(logits.view({-1, logits.size(-1)}), x.view(-1));
  };
  torch::Tensor w = model->transformer->h[0]->attn->rel_bias->weight;
  loss().backward();
  const torch::Tensor grad = w.grad().clone();
  EXPECT_GT(grad.abs().min().item<double>(), 0.0);  // every bucket is reached by T = 6
  torch::NoGradGuard no_grad;
  for (int64_t h = 0; h < 2; ++h) {
    for (int64_t b = 0; b < 4; ++b) {
      const double eps = 1e-6, keep = w[h][b].item<double>();
      w[h][b] = keep + eps;
      const double up = loss().item<double>();
      w[h][b] = keep - eps;
      const double down = loss().item<double>();
      w[h][b] = keep;
      EXPECT_NEAR(grad[h][b].item<double>(), (up - down) / (2 * eps), 1e-7) << h << "," << b;
    }
  }
}

TEST(PositionBias, WindowsPastBlockSizeEqualAModelBuiltForThem) {
  // Every encoding but learned extends past block_size; its logits there must be those of
  // the same weights in a model whose block_size covers the window, on both attention paths
  // (the fused kernel and the operators, which a hook forces).
  for (const std::string positions : {"sinusoidal", "rope", "none", "relative", "alibi"}) {
    const ModelConfig shortc = test::small_config({"pos_encoding=" + positions});
    ModelConfig longc = shortc;
    longc.block_size = 20;
    GPT short_model = test::random_model(shortc), long_model(longc);
    long_model->eval();
    {
      torch::NoGradGuard no_grad;
      const auto from = short_model->named_parameters();
      for (auto& item : long_model->named_parameters()) item.value().copy_(from[item.key()]);
    }
    const torch::Tensor x = torch::randint(11, {2, 20}, torch::kInt64);
    torch::NoGradGuard no_grad;
    const torch::Tensor want = long_model->forward(x);
    EXPECT_LE(test::max_abs_diff(short_model->forward(x), want), 1e-5) << positions;
    const CachedRun hooked = run_with_cache(short_model, x, names_ending_with("hook_pattern"));
    EXPECT_LE(test::max_abs_diff(hooked.logits, want), 1e-5) << positions;
  }
  GPT learned = test::random_model(test::small_config({"pos_encoding=learned"}));
  const std::string e = test::error_of([&] {
    learned->forward(torch::zeros({1, 9}, torch::kInt64));
  });
  EXPECT_NE(e.find("sequence of length 9 is longer than model.block_size 8, and learned "
                   "positions have no row past it"),
            std::string::npos)
      << e;
}

TEST(PositionBias, BadBucketsAreNamed) {
  const std::string e = test::error_of([] {
    test::small_config({"pos_encoding=relative", "num_buckets=16", "max_distance=8"});
  });
  EXPECT_NE(e.find("model.max_distance (8) must exceed model.num_buckets / 2 (8)"),
            std::string::npos)
      << e;
}

}  // namespace
}  // namespace tinylm
