// Head scores against a pattern built by hand: every score the definitions give.

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/analysis/head_scores.h"
#include "model/analysis/window_survey.h"
#include "small_model.h"

namespace tinylm {
namespace {

using test::random_model;

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
  GPT model = random_model(test::one_head_config(4, 3));
  const HookHandle h =
      model->add_hook("blocks.0.attn.hook_pattern",
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
              (0.0 + h_row({0.5, 0.5}) + h_row({0.2, 0.3, 0.5}) + h_row({0.1, 0.6, 0.2, 0.1})) / 4,
              1e-7);
}

TEST(HeadScores, TargetMatricesFollowTheirDefinitions) {
  const torch::Tensor induction = target_matrix("induction", kTokens)[0];
  const torch::Tensor expected = torch::tensor(
      {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}, {0.f, 1.f, 0.f, 0.f}, {0.f, 0.f, 1.f, 0.f}});
  EXPECT_TRUE(torch::equal(induction, expected));
  EXPECT_TRUE(torch::equal(target_matrix("previous_token", kTokens)[0],
                           torch::tensor({{0.f, 0.f, 0.f, 0.f},
                                          {1.f, 0.f, 0.f, 0.f},
                                          {0.f, 1.f, 0.f, 0.f},
                                          {0.f, 0.f, 1.f, 0.f}})));
  EXPECT_THROW(target_matrix("nonsense", kTokens), std::invalid_argument);
}

TEST(HeadScores, InductionRowsCanBeLimitedToTheSecondHalf) {
  GPT model = random_model(test::one_head_config(4, 3));
  const HookHandle h =
      model->add_hook("blocks.0.attn.hook_pattern",
                      [](const torch::Tensor&, const std::string&) { return hand_pattern(); });
  EXPECT_NEAR(
      head_scores(model, kTokens, /*induction_from=*/3).values.at("induction")[0][0].item<double>(),
      0.2, 1e-7);
}

// A survey reduces the scores it is asked for, each as a survey of all of them does, and
// refuses a name it does not know or is asked for twice.
TEST(HeadScores, ASurveyReducesOnlyTheScoresAskedFor) {
  GPT model = random_model(test::small_config());
  const torch::Tensor tokens = torch::randint(model->config().vocab_size, {3, 8},
                                              at::make_generator<at::CPUGeneratorImpl>(5));
  SurveyOptions all, two;
  all.scores = head_score_names();
  two.scores = {"induction", "entropy"};
  all.induction_from = two.induction_from = 4;
  const HeadScores every = survey_windows(model, tokens, {}, all).scores;
  const HeadScores asked = survey_windows(model, tokens, {}, two).scores;
  ASSERT_EQ(every.values.size(), head_score_names().size());
  ASSERT_EQ(asked.values.size(), 2u);
  for (const std::string& name : two.scores)
    EXPECT_TRUE(torch::equal(asked.values.at(name), every.values.at(name))) << name;
  for (const std::vector<std::string>& wrong : {std::vector<std::string>{"induction", "induction"},
                                                std::vector<std::string>{"inductive"}}) {
    SurveyOptions o;
    o.scores = wrong;
    EXPECT_THROW(survey_windows(model, tokens, {}, o), std::invalid_argument) << wrong.back();
  }
}

}  // namespace
}  // namespace tinylm
