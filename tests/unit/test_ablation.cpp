// Ablation at hook_z: zeroing every head of a layer equals removing its attention output,
// mean ablation, the --ablate list, and heads a model does not have.

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/activation_cache.h"
#include "model/analysis/ablation.h"
#include "model/analysis/induction_probe.h"
#include "small_model.h"

namespace tinylm {
namespace {

using test::random_model;
using test::some_tokens;

// The shapes of small_config's model on some_tokens.
constexpr int64_t kB = 2, kT = 6, kHs = 8;

TEST(Ablation, ZeroingEveryHeadOfALayerEqualsRemovingItsAttentionOutput) {
  ModelConfig c = test::small_config();
  c.bias = false;  // with a bias, c_proj of zeros is the bias, not nothing
  GPT model = random_model(c);
  const torch::Tensor tokens = some_tokens();
  torch::NoGradGuard no_grad;
  torch::Tensor ablated, removed;
  {
    const auto handles = zero_ablate(model, {{1, 0}, {1, 1}});
    ablated = model->forward(tokens);
  }
  {
    const HookHandle h = model->add_hook(
        "blocks.1.hook_attn_out",
        [](const torch::Tensor& x, const std::string&) { return torch::zeros_like(x); });
    removed = model->forward(tokens);
  }
  EXPECT_TRUE(torch::allclose(ablated, removed, 1e-6, 1e-6));
  EXPECT_FALSE(torch::allclose(ablated, model->forward(tokens)));
}

TEST(Ablation, ReplacesOnlyItsHeadsSlot) {
  GPT model = random_model(test::small_config());
  const torch::Tensor tokens = some_tokens();
  const torch::Tensor value = torch::arange(kHs).to(torch::kFloat32);  // (hs,)
  const HookHandle h = ablate_head(model, {0, 1}, value);
  const CachedRun run = run_with_cache(model, tokens, names_ending_with("attn.hook_z"));
  const torch::Tensor z = run.cache.at("blocks.0.attn.hook_z");  // (B, nh, T, hs)
  EXPECT_TRUE(torch::equal(z.select(1, 1), value.expand({kB, kT, kHs})));
  EXPECT_GT(z.select(1, 0).abs().sum().item<float>(), 0.0f);
}

TEST(Ablation, HeadListsAreCheckedAgainstTheModel) {
  EXPECT_EQ(parse_head_list("0.1,1.0").size(), 2u);
  EXPECT_EQ(parse_head_list("1.0")[0].layer, 1);
  for (const std::string bad : {"", "1", "1.", "a.b", "1.2,", "-1.0", "1.2.3"}) {
    EXPECT_THROW(parse_head_list(bad), std::invalid_argument) << bad;
  }
  GPT model = random_model(test::small_config());
  try {
    (void)zero_ablate(model, {{0, 0}, {1, 2}});
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "head 1.2 is not in this model: layers are 0-1 and heads 0-1");
  }
}

}  // namespace
}  // namespace tinylm
