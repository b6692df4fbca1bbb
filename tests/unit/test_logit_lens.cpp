// The logit lens: its last stage is the model's own prediction.

#include <limits>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/analysis/logit_lens.h"
#include "small_model.h"

namespace tinylm {
namespace {

using test::random_model;

TEST(LogitLens, LastStageIsTheModelsOwnPrediction) {
  ModelConfig c = test::one_head_config(6, 9);
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

// The prompt's own loss: -log p(token t + 1) at the last stage, the cross entropy of the
// model's logits. Both paths compute the logits in float32 over n_embd-long dot products
// (the lens through ln_f on a stacked stream): they may differ by rounding, a few epsilon
// per product term, and log-softmax moves a loss by at most twice a logit's change.
TEST(LogitLens, LossIsTheCrossEntropyOfTheModelsLogits) {
  ModelConfig c = test::one_head_config(6, 9);
  c.n_layer = 2;
  GPT model = random_model(c);
  const torch::Tensor tokens = torch::tensor({{3, 0, 4, 4, 1, 2}}, torch::kInt64);
  const LogitLens lens = logit_lens(model, tokens, 3);
  torch::NoGradGuard no_grad;
  const torch::Tensor logits = model->forward(tokens)[0].slice(0, 0, 5).to(torch::kFloat64);
  const torch::Tensor expected = torch::nn::functional::cross_entropy(
      logits, tokens[0].slice(0, 1),
      torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone));
  ASSERT_EQ(lens.loss.sizes().vec(), std::vector<int64_t>{5});
  ASSERT_EQ(lens.loss.scalar_type(), torch::kFloat64);
  const double tolerance = 2 * 8 * c.n_embd * std::numeric_limits<float>::epsilon();
  EXPECT_LT((lens.loss - expected).abs().max().item<double>(), tolerance);
  // A different next token is a different loss: the targets are the prompt's own.
  EXPECT_GT((lens.loss - expected.roll(1)).abs().max().item<double>(), 100 * tolerance);
}

// The lab's prompt views share one forward pass: the lens from a cache that also holds the
// patterns is the lens alone. Not bit for bit: watching the patterns sends attention down
// the operator path instead of the fused kernel (docs/DESIGN.md, four ways to compute
// attention), which rounds differently; within float32 rounding of n_embd-long products.
TEST(LogitLens, FromASharedCacheEqualsItsOwnPass) {
  ModelConfig c = test::one_head_config(6, 9);
  c.n_layer = 2;
  GPT model = random_model(c);
  model->eval();
  const torch::Tensor tokens = torch::tensor({{3, 0, 4, 4, 1, 2}}, torch::kInt64);
  const HookFilter lens_points = logit_lens_points();
  const CachedRun shared = run_with_cache(model, tokens, [&](const std::string& name) {
    return lens_points(name) || name.find("hook_pattern") != std::string::npos;
  });
  ASSERT_TRUE(shared.cache.contains("blocks.1.attn.hook_pattern"));
  const LogitLens alone = logit_lens(model, tokens, 3),
                  from = logit_lens(model, shared.cache, tokens, 3);
  EXPECT_EQ(from.stages, alone.stages);
  const double tolerance = 2 * 8 * c.n_embd * std::numeric_limits<float>::epsilon();
  EXPECT_TRUE(torch::equal(from.top_ids, alone.top_ids));
  EXPECT_LT((from.top_probs - alone.top_probs).abs().max().item<double>(), tolerance);
  EXPECT_LT((from.loss - alone.loss).abs().max().item<double>(), tolerance);
}

}  // namespace
}  // namespace tinylm
