// Head scores against a pattern built by hand, the induction probe, the priors read from
// the weights against the same numbers from a forward pass, and the logit lens.

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "model/activation_cache.h"
#include "model/analysis/head_scores.h"
#include "model/analysis/induction_probe.h"
#include "model/analysis/logit_lens.h"
#include "model/analysis/priors.h"
#include "small_model.h"

namespace tinylm {
namespace {

using test::random_model;

ModelConfig one_head(int64_t T, int64_t V) {
  return test::small_config({"n_layer=1", "n_head=1", "n_embd=8", "block_size=" + std::to_string(T)}, V);
}

// tokens 1 2 1 2 and a pattern whose every score is worked out in the comments.
const torch::Tensor kTokens = torch::tensor({{1, 2, 1, 2}}, torch::kInt64);
torch::Tensor hand_pattern() {
  return torch::tensor({{1.0f, 0.0f, 0.0f, 0.0f},
                        {0.5f, 0.5f, 0.0f, 0.0f},
                        {0.2f, 0.3f, 0.5f, 0.0f},
                        {0.1f, 0.6f, 0.2f, 0.1f}})
      .view({1, 1, 4, 4});
}

TEST(HeadScores, HandBuiltPatternGivesTheDefinitionsNumbers) {
  // The model's own pattern is replaced by the hand-built one at hook_pattern, so the
  // scores are computed the way `inspect` computes them, through the cache.
  GPT model = random_model(one_head(4, 3));
  const HookHandle h = model->add_hook("blocks.0.attn.hook_pattern",
                                       [](const torch::Tensor&, const std::string&) { return hand_pattern(); });
  const HeadScores s = head_scores(model, kTokens);
  const auto score = [&](const char* name) { return s.values.at(name)[0][0].item<double>(); };
  EXPECT_NEAR(score("previous_token"), (0.5 + 0.3 + 0.2) / 3, 1e-7);  // rows 1-3
  EXPECT_NEAR(score("self"), (1.0 + 0.5 + 0.5 + 0.1) / 4, 1e-7);
  EXPECT_NEAR(score("first_token"), (1.0 + 0.5 + 0.2 + 0.1) / 4, 1e-7);
  EXPECT_NEAR(score("duplicate_token"), (0.2 + 0.6) / 2, 1e-7);  // rows 2 (j=0) and 3 (j=1)
  EXPECT_NEAR(score("induction"), (0.3 + 0.2) / 2, 1e-7);        // rows 2 (j=1) and 3 (j=2)
  const auto h_row = [](std::vector<double> p) {
    double e = 0;
    for (double x : p) e -= x * std::log(x);
    return e;
  };
  EXPECT_NEAR(score("entropy"),
              (0.0 + h_row({0.5, 0.5}) + h_row({0.2, 0.3, 0.5}) + h_row({0.1, 0.6, 0.2, 0.1})) / 4, 1e-7);
}

TEST(HeadScores, TargetMatricesFollowTheirDefinitions) {
  const torch::Tensor induction = target_matrix("induction", kTokens)[0];
  const torch::Tensor expected = torch::tensor({{0.f, 0.f, 0.f, 0.f},
                                                {0.f, 0.f, 0.f, 0.f},
                                                {0.f, 1.f, 0.f, 0.f},
                                                {0.f, 0.f, 1.f, 0.f}});
  EXPECT_TRUE(torch::equal(induction, expected));
  EXPECT_TRUE(torch::equal(target_matrix("previous_token", kTokens)[0],
                           torch::tensor({{0.f, 0.f, 0.f, 0.f}, {1.f, 0.f, 0.f, 0.f},
                                          {0.f, 1.f, 0.f, 0.f}, {0.f, 0.f, 1.f, 0.f}})));
  EXPECT_THROW(target_matrix("nonsense", kTokens), std::invalid_argument);
}

TEST(HeadScores, InductionRowsCanBeLimitedToTheSecondHalf) {
  GPT model = random_model(one_head(4, 3));
  const HookHandle h = model->add_hook("blocks.0.attn.hook_pattern",
                                       [](const torch::Tensor&, const std::string&) { return hand_pattern(); });
  EXPECT_NEAR(head_scores(model, kTokens, /*induction_from=*/3).values.at("induction")[0][0].item<double>(),
              0.2, 1e-7);
}

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
  GPT model = random_model(one_head(2 * R, 6));
  const torch::Tensor probe = torch::tensor({{0, 1, 2, 3, 0, 1, 2, 3}, {5, 4, 3, 1, 5, 4, 3, 1}});
  const torch::Tensor logits = model->forward(probe).detach();  // (2, 2R, V)
  const auto mean_loss = [&](int64_t from, int64_t to) {
    const torch::Tensor l = logits.slice(1, from, to).reshape({-1, 6});
    return torch::cross_entropy_loss(l, probe.slice(1, from + 1, to + 1).reshape(-1)).item<double>();
  };
  const ProbeLosses losses = probe_losses(model, probe);
  EXPECT_NEAR(losses.first_half, mean_loss(0, R - 1), 1e-6);
  EXPECT_NEAR(losses.second_half, mean_loss(R, 2 * R - 1), 1e-6);
  // Position R-1 (predicting the repeat's start) is in neither half.
  EXPECT_GT(std::abs(losses.second_half - mean_loss(R - 1, 2 * R - 1)), 1e-4);
  EXPECT_GT(std::abs(losses.first_half - mean_loss(0, R)), 1e-4);
}

TEST(Priors, PositionScoresAreWhatTheHeadComputesFromPositionsAlone) {
  ModelConfig c = one_head(6, 5);
  c.n_head = 2;
  c.n_layer = 2;
  GPT model = random_model(c);
  const Priors priors = head_priors(model);
  // With a zero token embedding, block 0 sees the positions alone.
  torch::NoGradGuard no_grad;
  model->transformer->wte->weight.zero_();
  const CachedRun run = run_with_cache(model, torch::zeros({1, 6}, torch::kInt64));
  EXPECT_TRUE(torch::allclose(priors.position_scores[0], run.cache.at("blocks.0.attn.hook_scores")[0],
                              1e-5, 1e-5));
  EXPECT_TRUE(torch::allclose(priors.position_pattern[0], run.cache.at("blocks.0.attn.hook_pattern")[0],
                              1e-5, 1e-6));
  // Its previous-token score is the definition's, on that pattern.
  const torch::Tensor p = priors.position_pattern[0][1];  // head 1 (T, T)
  double sum = 0;
  for (int64_t i = 1; i < 6; ++i) sum += p[i][i - 1].item<double>();
  EXPECT_NEAR(priors.position_previous_token[0][1].item<double>(), sum / 5, 1e-6);
}

TEST(Priors, TokenScoresAreWhatTheHeadComputesFromTokensAlone) {
  ModelConfig c = one_head(6, 5);
  c.pos_encoding = PosEncoding::kNone;
  GPT model = random_model(c);
  const Priors priors = head_priors(model);
  EXPECT_FALSE(priors.position_scores.defined());
  const torch::Tensor tokens = torch::tensor({{3, 0, 4, 4, 1, 2}}, torch::kInt64);
  const CachedRun run = run_with_cache(model, tokens);
  const torch::Tensor scores = run.cache.at("blocks.0.attn.hook_scores")[0][0];  // (T, T)
  for (int64_t i = 0; i < 6; ++i) {
    for (int64_t j = 0; j <= i; ++j) {
      EXPECT_NEAR(scores[i][j].item<float>(),
                  priors.token_scores[0][0][tokens[0][i].item<int64_t>()][tokens[0][j].item<int64_t>()]
                      .item<float>(),
                  1e-5);
    }
  }
}

TEST(Priors, OvCopyingEqualsTheFullVocabularyMatrixs) {
  ModelConfig c = one_head(6, 7);
  c.n_head = 2;
  GPT model = random_model(c);
  const Priors priors = head_priors(model);
  torch::NoGradGuard no_grad;
  // The V x V circuit the long way: embeddings through ln_1, W_V, W_O, ln_f's centring and
  // weight, the unembedding.
  Block& block = model->transformer->h[0];
  const torch::Tensor e = block->ln_1(model->transformer->wte->weight).to(torch::kFloat64);  // (V, C)
  const torch::Tensor w = block->attn->c_attn->weight.to(torch::kFloat64);
  const torch::Tensor b = block->attn->c_attn->bias.to(torch::kFloat64);
  for (int64_t h = 0; h < 2; ++h) {
    const torch::Tensor w_v = w.slice(0, 16 + 4 * h, 16 + 4 * (h + 1));  // (hs, C)
    const torch::Tensor v = e.matmul(w_v.t()) + b.slice(0, 16 + 4 * h, 16 + 4 * (h + 1));  // (V, hs)
    const torch::Tensor w_o = block->attn->c_proj->weight.slice(1, 4 * h, 4 * (h + 1)).to(torch::kFloat64);
    torch::Tensor out = v.matmul(w_o.t());                        // (V, C)
    out = (out - out.mean(1, true)) * model->transformer->ln_f->weight.to(torch::kFloat64);
    const torch::Tensor m = out.matmul(model->unembedding().to(torch::kFloat64).t());  // (V, V)
    const double expected = m.trace().item<double>() / torch::linalg::eigvals(m).abs().sum().item<double>();
    EXPECT_NEAR(priors.ov_copying[0][h].item<double>(), expected, 1e-5);
    const double top1 = (m.argmax(1) == torch::arange(7)).to(torch::kFloat64).mean().item<double>();
    EXPECT_NEAR(priors.ov_top1[0][h].item<double>(), top1, 1e-6);
  }
}

TEST(LogitLens, LastStageIsTheModelsOwnPrediction) {
  ModelConfig c = one_head(6, 9);
  c.n_layer = 3;
  GPT model = random_model(c);
  const torch::Tensor tokens = torch::tensor({{3, 0, 4, 4, 1, 2}}, torch::kInt64);
  const LogitLens lens = logit_lens(model, tokens, 3);
  EXPECT_EQ(lens.stages, (std::vector<std::string>{"embed", "block 0", "block 1", "block 2"}));
  ASSERT_EQ(lens.top_ids.sizes().vec(), (std::vector<int64_t>{4, 6, 3}));
  torch::NoGradGuard no_grad;
  const auto top = torch::softmax(model->forward(tokens)[0], -1).topk(3, -1);
  EXPECT_TRUE(torch::equal(lens.top_ids[3], std::get<1>(top)));
  EXPECT_TRUE(torch::allclose(lens.top_probs[3], std::get<0>(top), 1e-5, 1e-6));
  EXPECT_FALSE(torch::equal(lens.top_ids[0], lens.top_ids[3]));
}

}  // namespace
}  // namespace tinylm
