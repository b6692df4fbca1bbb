// Token sampling: greedy, top-k, top-p and temperature do what they say.

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <set>

#include "model/generate.h"
#include "small_model.h"

namespace tinylm {
namespace {

const torch::Tensor kLogits = torch::tensor({1.0f, 3.0f, 2.0f, 0.5f, 2.9f});

std::set<int64_t> draws(const SamplingOptions& options, int n = 400) {
  auto rng = at::make_generator<at::CPUGeneratorImpl>(5);
  std::set<int64_t> seen;
  for (int i = 0; i < n; ++i) seen.insert(sample_token(kLogits, options, rng));
  return seen;
}

TEST(Sampling, TemperatureZeroIsArgmax) {
  SamplingOptions o;
  o.temperature = 0.0;
  EXPECT_EQ(draws(o), (std::set<int64_t>{1}));
}

TEST(Sampling, TopKKeepsTheKMostLikely) {
  SamplingOptions o;
  o.top_k = 1;
  EXPECT_EQ(draws(o), (std::set<int64_t>{1}));
  o.top_k = 3;
  EXPECT_EQ(draws(o), (std::set<int64_t>{1, 2, 4}));
  o.top_k = 0;
  EXPECT_EQ(draws(o, 2000), (std::set<int64_t>{0, 1, 2, 3, 4}));
}

TEST(Sampling, TopPKeepsTheSmallestSufficientSet) {
  // probabilities: 1 -> .40, 4 -> .36, 2 -> .15, 0 -> .05, 3 -> .03 (rounded)
  SamplingOptions o;
  o.top_p = 0.3;
  EXPECT_EQ(draws(o), (std::set<int64_t>{1}));
  o.top_p = 0.6;
  EXPECT_EQ(draws(o), (std::set<int64_t>{1, 4}));
  o.top_p = 0.85;
  EXPECT_EQ(draws(o), (std::set<int64_t>{1, 2, 4}));
}

// top_p is documented as (0, 1]: however small, the likeliest token stays. 1e-38 is below
// float's smallest normal number, so with denormals flushed, as every command runs, a
// comparison read it as 0 and dropped every token ("probability tensor contains ... nan").
TEST(Sampling, ATinyTopPKeepsTheLikeliestToken) {
  const bool flushed = at::globalContext().setFlushDenormal(true);
  ASSERT_TRUE(flushed) << "this CPU cannot flush denormals";
  SamplingOptions o;
  for (const double p : {1e-38, 1e-45, 1e-300}) {
    o.top_p = p;
    EXPECT_EQ(draws(o), (std::set<int64_t>{1})) << p;
  }
  at::globalContext().setFlushDenormal(false);
}

TEST(Sampling, FrequenciesFollowTheSoftmax) {
  auto rng = at::make_generator<at::CPUGeneratorImpl>(9);
  SamplingOptions o;
  o.temperature = 2.0;
  const torch::Tensor p = torch::softmax(kLogits / 2.0, 0);
  std::vector<int> counts(5);
  const int n = 20000;
  for (int i = 0; i < n; ++i) ++counts[static_cast<size_t>(sample_token(kLogits, o, rng))];
  for (int64_t v = 0; v < 5; ++v) {
    EXPECT_NEAR(counts[static_cast<size_t>(v)] / double(n), p[v].item<double>(), 0.015) << v;
  }
}

TEST(Sampling, SameSeedSameText) {
  const ModelConfig c =
      test::small_config({"n_layer=1", "n_head=1", "n_embd=8", "block_size=4"}, 7);
  GPT model(c);
  auto init = at::make_generator<at::CPUGeneratorImpl>(1);
  model->init_weights(init);
  auto a = at::make_generator<at::CPUGeneratorImpl>(3),
       b = at::make_generator<at::CPUGeneratorImpl>(3);
  GenerationOptions o;
  o.max_new_tokens = 20;  // longer than block_size: the window slides
  const auto first = generate(model, {1, 2}, o, a);
  const auto second = generate(model, {1, 2}, o, b);
  EXPECT_EQ(first, second);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].size(), 20u);
}

TEST(Sampling, EachRowOfABatchIsFilteredOnItsOwn) {
  // Row 0 has one clear winner (p = .987); row 1 two near-equal ones (.493 and .488).
  const torch::Tensor logits = torch::tensor({{0.0f, 5.0f, 0.0f}, {3.0f, 0.0f, 3.01f}});
  auto rng = at::make_generator<at::CPUGeneratorImpl>(5);
  const auto seen = [&](const SamplingOptions& o) {
    std::vector<std::set<int64_t>> rows(2);
    for (int i = 0; i < 300; ++i) {
      const torch::Tensor ids = sample_tokens(logits, o, rng);  // (2,)
      rows[0].insert(ids[0].item<int64_t>()), rows[1].insert(ids[1].item<int64_t>());
    }
    return rows;
  };
  SamplingOptions o;
  o.top_p = 0.45;
  EXPECT_EQ(seen(o), (std::vector<std::set<int64_t>>{{1}, {2}}));
  o.top_p = 0.6;
  EXPECT_EQ(seen(o), (std::vector<std::set<int64_t>>{{1}, {0, 2}}));
  o.top_p = 1.0;
  o.top_k = 2;
  EXPECT_EQ(seen(o), (std::vector<std::set<int64_t>>{{0, 1, 2}, {0, 2}}));
}

}  // namespace
}  // namespace tinylm
