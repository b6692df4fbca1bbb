// Hook points and the activation cache: every name with its documented shape, in forward
// order, reading, replacing, and a hook's scope.

#include <thread>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/activation_cache.h"
#include "model/attention.h"
#include "model/gpt.h"
#include "model/kernels/kernel_choice.h"
#include "small_model.h"

namespace tinylm {
namespace {

using test::some_tokens;
constexpr int64_t kB = 2, kT = 6, kC = 16, kNh = 2, kHs = 8, kV = 11, kL = 2;

ModelConfig hook_config() { return test::small_config({}, kV); }  // kL, kNh, kC: the base

using test::random_model;

TEST(Hooks, CacheHoldsEveryHookWithItsDocumentedShape) {
  GPT model = random_model(hook_config());
  const std::vector<int64_t> btc = {kB, kT, kC}, heads = {kB, kNh, kT, kHs},
                             square = {kB, kNh, kT, kT}, mlp = {kB, kT, 4 * kC};
  std::vector<std::pair<std::string, std::vector<int64_t>>> expected = {
      {"hook_embed", btc}, {"hook_pos_embed", {kT, kC}}};
  for (int64_t l = 0; l < kL; ++l) {
    const std::string b = "blocks." + std::to_string(l) + ".";
    for (const auto& item :
         std::vector<std::pair<std::string, std::vector<int64_t>>>{{"hook_resid_pre", btc},
                                                                   {"attn.hook_q", heads},
                                                                   {"attn.hook_k", heads},
                                                                   {"attn.hook_v", heads},
                                                                   {"attn.hook_scores", square},
                                                                   {"attn.hook_pattern", square},
                                                                   {"attn.hook_z", heads},
                                                                   {"hook_attn_out", btc},
                                                                   {"hook_resid_mid", btc},
                                                                   {"mlp.hook_pre", mlp},
                                                                   {"mlp.hook_post", mlp},
                                                                   {"hook_mlp_out", btc},
                                                                   {"hook_resid_post", btc}}) {
      expected.emplace_back(b + item.first, item.second);
    }
  }
  expected.emplace_back("ln_f.hook_normalized", btc);

  std::vector<std::string> names;
  for (const auto& item : expected) names.push_back(item.first);
  EXPECT_EQ(model->hook_names(), names);  // forward order

  const CachedRun run = run_with_cache(model, some_tokens());
  EXPECT_EQ(run.cache.size(), expected.size());
  for (const auto& [name, shape] : expected) {
    ASSERT_TRUE(run.cache.contains(name)) << name;
    EXPECT_EQ(run.cache.at(name).sizes().vec(), shape) << name;
  }
}

TEST(Hooks, AttentionOnlyBlocksHaveNoMlpHooks) {
  ModelConfig c = hook_config();
  c.attn_only = true;
  c.pos_encoding = PosEncoding::kNone;
  GPT model = random_model(c);
  for (const std::string& name : model->hook_names()) {
    EXPECT_EQ(name.find("mlp"), std::string::npos) << name;
    EXPECT_EQ(name.find("resid_mid"), std::string::npos) << name;
    EXPECT_NE(name, "hook_pos_embed");
  }
  EXPECT_EQ(model->hook_names().size(), 1u + kL * 9 + 1);
  EXPECT_FALSE(model->named_parameters().contains("transformer.h.0.ln_2.weight"));
}

TEST(Hooks, CachedTensorsAreTheForwardPassTensors) {
  GPT model = random_model(hook_config());
  const torch::Tensor tokens = some_tokens();
  const CachedRun run = run_with_cache(model, tokens);
  torch::NoGradGuard no_grad;
  // Hooks take the explicit path inside attention and the MLP; the norms, with no hook point
  // inside, stay fused: the fused forward's numbers to rounding. On the operator path
  // throughout, hooks that read change no bit.
  EXPECT_LT(test::max_abs_diff(run.logits, model->forward(tokens)), 1e-5);
  {
    ScopedKernelChoice operators(Kernels::kOperators);
    EXPECT_TRUE(torch::equal(run_with_cache(model, tokens).logits, model->forward(tokens)));
  }
  // The pattern is the softmax of the cached scores, which come from the cached q and k.
  const ActivationCache& cache = run.cache;
  const torch::Tensor scores =
      attention_scores(cache.at("blocks.1.attn.hook_q"), cache.at("blocks.1.attn.hook_k"), true);
  EXPECT_TRUE(torch::allclose(scores, cache.at("blocks.1.attn.hook_scores")));
  EXPECT_TRUE(torch::allclose(torch::softmax(scores, -1), cache.at("blocks.1.attn.hook_pattern")));
  // The residual stream adds up: mid = pre + attn_out, post = mid + mlp_out.
  EXPECT_TRUE(
      torch::allclose(cache.at("blocks.0.hook_resid_mid"),
                      cache.at("blocks.0.hook_resid_pre") + cache.at("blocks.0.hook_attn_out")));
  EXPECT_TRUE(
      torch::allclose(cache.at("blocks.0.hook_resid_post"),
                      cache.at("blocks.0.hook_resid_mid") + cache.at("blocks.0.hook_mlp_out")));
  EXPECT_TRUE(
      torch::equal(cache.at("blocks.0.hook_resid_post"), cache.at("blocks.1.hook_resid_pre")));
  EXPECT_TRUE(torch::allclose(cache.at("blocks.0.hook_resid_pre"),
                              cache.at("hook_embed") + cache.at("hook_pos_embed")));
}

TEST(Hooks, FilterKeepsOnlyTheNamesItSelects) {
  GPT model = random_model(hook_config());
  const CachedRun run =
      run_with_cache(model, some_tokens(), names_ending_with("attn.hook_pattern"));
  EXPECT_EQ(run.cache.names(),
            (std::vector<std::string>{"blocks.0.attn.hook_pattern", "blocks.1.attn.hook_pattern"}));
  EXPECT_THROW(run.cache.at("blocks.0.attn.hook_q"), std::out_of_range);
  EXPECT_FALSE(model->hook_point("blocks.0.attn.hook_pattern").has_hooks());  // cache hooks gone
}

TEST(Hooks, ReplacingHookChangesTheOutputAndIsGoneAfterItsScope) {
  GPT model = random_model(hook_config());
  const torch::Tensor tokens = some_tokens();
  torch::NoGradGuard no_grad;
  const torch::Tensor before = model->forward(tokens);
  {
    const HookHandle handle =
        model->add_hook("blocks.0.hook_resid_mid",
                        [](const torch::Tensor& x, const std::string&) { return x * 2; });
    const torch::Tensor hooked = model->forward(tokens);
    EXPECT_FALSE(torch::allclose(hooked, before));
    // Positions are independent until attention mixes them, so the change reaches every one.
    EXPECT_GT((hooked - before).abs().amax({0, 2}).min().item<float>(), 1e-4f);
  }
  EXPECT_TRUE(torch::equal(model->forward(tokens), before));
}

TEST(Hooks, HooksOnOnePointRunInOrderAndSeeTheirNames) {
  GPT model = random_model(hook_config());
  std::vector<std::string> seen;
  HookHandle first =
      model->add_hook("hook_embed", [&](const torch::Tensor& x, const std::string& n) {
        seen.push_back("first:" + n);
        return x + 1;
      });
  HookHandle second =
      model->add_hook("hook_embed", [&](const torch::Tensor& x, const std::string& n) {
        seen.push_back("second:" + n);
        return x;
      });
  torch::NoGradGuard no_grad;
  model->forward(some_tokens());
  EXPECT_EQ(seen, (std::vector<std::string>{"first:hook_embed", "second:hook_embed"}));
  first.remove();
  seen.clear();
  model->forward(some_tokens());
  EXPECT_EQ(seen, (std::vector<std::string>{"second:hook_embed"}));
}

TEST(Hooks, HandleMayOutliveItsModel) {
  HookHandle handle;
  {
    GPT model = random_model(hook_config());
    handle =
        model->add_hook("hook_embed", [](const torch::Tensor& x, const std::string&) { return x; });
  }
  handle.remove();  // the hook list is gone: nothing to do, no crash
  SUCCEED();
}

TEST(Hooks, AHookIsSeenOnlyByTheThreadThatAddedIt) {
  GPT model = random_model(hook_config());
  model->eval();
  const torch::Tensor tokens = some_tokens();
  torch::NoGradGuard no_grad;
  const torch::Tensor plain = model->forward(tokens);
  const HookHandle doubled = model->add_hook(
      "blocks.0.hook_resid_mid", [](const torch::Tensor& x, const std::string&) { return x * 2; });
  EXPECT_FALSE(torch::equal(model->forward(tokens), plain));
  EXPECT_TRUE(model->has_hooks());
  torch::Tensor other;
  bool other_sees_hooks = true;
  std::thread([&] {
    torch::NoGradGuard thread_no_grad;
    other = model->forward(tokens);
    other_sees_hooks = model->has_hooks();
  }).join();
  EXPECT_TRUE(torch::equal(other, plain));
  EXPECT_FALSE(other_sees_hooks);
}

// The lab's case: one model, read by many threads at once, each with its own ablation. Each
// thread's logits equal the same ablation run alone.
TEST(Hooks, ThreadsSharingAModelEachSeeTheirOwnAblation) {
  // Relative positions: their bucket cache is state the threads share.
  GPT model = random_model(test::small_config({"pos_encoding=relative"}, kV));
  model->eval();
  const torch::Tensor tokens = some_tokens();
  const auto ablated_logits = [&](int64_t head) {
    torch::NoGradGuard no_grad;
    const HookHandle zeroed =
        model->add_hook("blocks.1.attn.hook_z", [head](const torch::Tensor& z, const std::string&) {
          torch::Tensor out = z.clone();
          out.select(1, head).zero_();
          return out;
        });
    return model->forward(tokens);
  };
  std::vector<torch::Tensor> alone;
  for (int64_t h = 0; h < kNh; ++h) alone.push_back(ablated_logits(h));
  ASSERT_FALSE(torch::equal(alone[0], alone[1]));
  constexpr int kThreads = 8, kRounds = 20;
  std::vector<int> mismatches(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int r = 0; r < kRounds; ++r) {
        const int64_t h = (t + r) % kNh;
        if (!torch::equal(ablated_logits(h), alone[static_cast<size_t>(h)]))
          ++mismatches[static_cast<size_t>(t)];
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(mismatches, std::vector<int>(kThreads, 0));
  EXPECT_FALSE(model->has_hooks());
}

TEST(Hooks, UnknownNameIsAnErrorThatNamesACloseOne) {
  GPT model = random_model(hook_config());
  try {
    (void)model->hook_point("blocks.0.attn.hook_patern");
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("blocks.0.attn.hook_pattern"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tinylm
