// One forward pass per prompt, shared by its views and kept, within a byte budget, for the
// next request; the views read from it equal their own passes.

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/analysis/logit_attribution.h"
#include "model/analysis/logit_lens.h"
#include "small_model.h"
#include "tools/inspect/prompt_runs.h"

namespace tinylm {
namespace {

TEST(PromptRuns, APromptIsRunOnceAndItsViewsEqualTheirOwnPasses) {
  GPT model = test::random_model(test::small_config({"n_layer=2", "n_head=2", "n_embd=16"}, 11));
  PromptRuns runs;
  const torch::Tensor a = torch::tensor({1, 5, 2, 9, 5, 0, 3}, torch::kInt64);
  const torch::Tensor b = torch::tensor({4, 4, 1, 7}, torch::kInt64);
  const auto first = runs.of(model, a);
  EXPECT_EQ(runs.of(model, a.clone()), first);  // by value, not by tensor
  EXPECT_EQ(runs.passes(), 1);
  EXPECT_NE(runs.of(model, b), first);
  EXPECT_EQ(runs.passes(), 2);
  EXPECT_EQ(runs.of(model, a), first);  // b did not push a out of 512 MB

  const LogitAttribution own = logit_attribution(model, a),
                         kept = logit_attribution(model, *first, a);
  EXPECT_TRUE(torch::equal(own.heads, kept.heads));
  EXPECT_TRUE(torch::equal(own.logits, kept.logits));
  const LogitLens lens = logit_lens(model, a.unsqueeze(0)),
                  from_kept = logit_lens(model, first->cache, a.unsqueeze(0));
  EXPECT_TRUE(torch::equal(lens.top_ids, from_kept.top_ids));
  EXPECT_TRUE(first->cache.contains("blocks.1.attn.hook_pattern"));
  EXPECT_FALSE(first->cache.contains("blocks.1.attn.hook_attn_scores"));  // only what views read
}

TEST(PromptRuns, TheLeastRecentlyUsedPassGoesFirstAndAnOversizedOneIsNotKept) {
  GPT model = test::random_model(test::small_config({"n_layer=1", "n_head=1", "n_embd=8"}, 11));
  const torch::Tensor a = torch::tensor({1, 2, 3}, torch::kInt64),
                      b = torch::tensor({3, 2, 1}, torch::kInt64),
                      c = torch::tensor({2, 2, 2}, torch::kInt64);
  const int64_t one = [&] {
    PromptRuns probe;
    probe.of(model, a);
    return probe.kept_bytes();
  }();
  ASSERT_GT(one, 0);
  PromptRuns two(2 * one);  // room for two passes of three tokens
  two.of(model, a);
  two.of(model, b);
  two.of(model, a);  // a is now the most recent
  two.of(model, c);  // b goes
  EXPECT_EQ(two.passes(), 3);
  EXPECT_EQ(two.kept_bytes(), 2 * one);
  two.of(model, a);
  EXPECT_EQ(two.passes(), 3);
  two.of(model, b);
  EXPECT_EQ(two.passes(), 4);

  PromptRuns none(one - 1);
  none.of(model, a);
  none.of(model, a);
  EXPECT_EQ(none.passes(), 2);
  EXPECT_EQ(none.kept_bytes(), 0);
}

}  // namespace
}  // namespace tinylm
