// Generation with a KV cache: the cached path gives the logits of running the whole window
// for every position encoding and block, past block_size too; batched samples are
// independent rows of one computation.

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>

#include "model/analysis/ablation.h"
#include "model/generate.h"
#include "model/ops/decode_step.h"
#include "small_model.h"

namespace tinylm {
namespace {

struct Variant {
  std::string pos_encoding, norm = "layernorm", mlp = "gelu";
  int64_t n_kv_head = 0, n_layer = 2;
};

std::string name_of(const Variant& v) {
  return v.pos_encoding + "_" + v.norm + "_" + v.mlp + "_kv" + std::to_string(v.n_kv_head) + "_L" +
         std::to_string(v.n_layer);
}

ModelConfig config_of(const Variant& v) {
  return test::small_config({"n_layer=" + std::to_string(v.n_layer), "n_head=4", "n_embd=32",
                             "pos_encoding=" + v.pos_encoding, "norm=" + v.norm, "mlp=" + v.mlp,
                             "n_kv_head=" + std::to_string(v.n_kv_head)},
                            /*vocab_size=*/13);
}

torch::Tensor random_tokens(int64_t B, int64_t S, int64_t V, uint64_t seed) {
  auto rng = at::make_generator<at::CPUGeneratorImpl>(seed);
  return torch::randint(V, {B, S}, rng, torch::kInt64);
}

class KVCacheEquality : public ::testing::TestWithParam<Variant> {};

TEST_P(KVCacheEquality, CachedLogitsEqualTheWholeWindowsWithinBlockSize) {
  const ModelConfig c = config_of(GetParam());
  GPT model = test::random_model(c);
  const torch::Tensor tokens = random_tokens(3, c.block_size, c.vocab_size, 11);  // (B, T)
  // Prompt of 3, then one token at a time up to a full window.
  const torch::Tensor cached = step_logits(model, tokens, 3, true);     // (B, 6, V)
  const torch::Tensor uncached = step_logits(model, tokens, 3, false);  // (B, 6, V)
  EXPECT_LE(test::max_abs_diff(cached, uncached), 1e-5);
  // And the whole-window logits are the model's plain forward pass at each position.
  torch::NoGradGuard no_grad;
  const torch::Tensor full = model->forward(tokens).narrow(1, 2, c.block_size - 2);
  EXPECT_LE(test::max_abs_diff(uncached, full), 1e-5);
}

TEST_P(KVCacheEquality, ChunksThroughTheCacheEqualOneForwardPass) {
  // Several new tokens against a non-empty cache: the mask must shift by the cached length.
  const ModelConfig c = config_of(GetParam());
  GPT model = test::random_model(c);
  const torch::Tensor tokens = random_tokens(2, c.block_size, c.vocab_size, 13);
  torch::NoGradGuard no_grad;
  KVCache cache = model->make_cache();
  std::vector<torch::Tensor> parts;
  for (const auto& [start, length] :
       std::vector<std::pair<int64_t, int64_t>>{{0, 3}, {3, 1}, {4, 4}}) {
    parts.push_back(model->forward(tokens.narrow(1, start, length), cache));
  }
  EXPECT_EQ(cache.length(), c.block_size);
  EXPECT_LE(test::max_abs_diff(torch::cat(parts, 1), model->forward(tokens)), 1e-5);
}

TEST_P(KVCacheEquality, PastBlockSizeTheWindowSlides) {
  const Variant v = GetParam();
  const ModelConfig c = config_of(v);
  GPT model = test::random_model(c);
  const int64_t S = 3 * c.block_size + 1;
  const torch::Tensor tokens = random_tokens(2, S, c.vocab_size, 12);
  const torch::Tensor cached = step_logits(model, tokens, 2, true);  // (B, S - 1, V)
  const torch::Tensor uncached = step_logits(model, tokens, 2, false);
  ASSERT_EQ(cached.size(1), S - 1);
  const double diff = test::max_abs_diff(cached, uncached);
  if (!c.positions().slides() || c.n_layer == 1) {
    // Re-encoding (absolute positions), or dropping when keys depend on their token alone.
    EXPECT_LE(diff, 1e-5);
  } else {
    // Deeper relative models: equal while the window is whole; after that a cached key of
    // layer 1 remembers tokens that have left the window.
    const int64_t within = c.block_size - 2 + 1;
    EXPECT_LE(test::max_abs_diff(cached.narrow(1, 0, within), uncached.narrow(1, 0, within)), 1e-5);
    EXPECT_GT(diff, 1e-4);
  }
  EXPECT_TRUE(torch::isfinite(cached).all().item<bool>());
}

TEST_P(KVCacheEquality, DirectStepEqualsTheOperatorPath) {
  // decode_step against GPT::forward with a cache, from the same cached prompt, over a
  // whole window and (relative positions) past it.
  const ModelConfig c = config_of(GetParam());
  GPT model = test::random_model(c);
  const torch::Tensor tokens = random_tokens(3, 2 * c.block_size, c.vocab_size, 14);
  torch::NoGradGuard no_grad;
  KVCache direct = model->make_cache(), operators = model->make_cache();
  model->forward(tokens.narrow(1, 0, 2), direct);
  model->forward(tokens.narrow(1, 0, 2), operators);
  const int64_t end = c.positions().slides() ? tokens.size(1) : c.block_size;
  for (int64_t t = 2; t < end; ++t) {
    ASSERT_TRUE(can_decode_directly(model, direct));
    const torch::Tensor a = decode_step(model, tokens.select(1, t), direct);  // (B, V)
    const torch::Tensor b =
        model->forward(tokens.narrow(1, t, 1), operators).select(1, 0);  // (B, V)
    ASSERT_LE(test::max_abs_diff(a, b), 1e-5) << "position " << t;
  }
  EXPECT_EQ(direct.next_position(), operators.next_position());
}

INSTANTIATE_TEST_SUITE_P(
    AllEncodingsAndBlocks, KVCacheEquality,
    ::testing::Values(
        Variant{"learned"}, Variant{"sinusoidal"}, Variant{"rope"}, Variant{"none"},
        Variant{"rope", "layernorm", "gelu", 0, 1}, Variant{"none", "layernorm", "gelu", 0, 1},
        Variant{"rope", "rmsnorm", "swiglu", 2}, Variant{"learned", "rmsnorm", "swiglu", 1},
        Variant{"learned", "layernorm", "gelu_tanh"}, Variant{"rope", "layernorm", "gelu", 1, 1},
        Variant{"relative"}, Variant{"alibi"}, Variant{"relative", "layernorm", "gelu", 0, 1},
        Variant{"alibi", "layernorm", "gelu", 0, 1}, Variant{"relative", "rmsnorm", "swiglu", 2},
        Variant{"alibi", "rmsnorm", "swiglu", 1}),
    [](const ::testing::TestParamInfo<Variant>& info) { return name_of(info.param); });

TEST(Generation, TheDirectStepRefusesIdsOutsideTheVocabulary) {
  // It reads embedding rows by pointer: an id past the table must be an error, not a read.
  GPT model = test::random_model(test::small_config({"pos_encoding=rope"}));
  torch::NoGradGuard no_grad;
  KVCache cache = model->make_cache();
  model->forward(torch::tensor({{1, 2, 3, 4, 5, 6, 7, 8}}), cache);  // full: a step would slide it
  for (const int64_t id : {int64_t{11}, int64_t{-1}}) {
    const std::string e = test::error_of([&] { decode_step(model, torch::tensor({id}), cache); });
    EXPECT_NE(e.find("token id " + std::to_string(id) + " is outside the vocabulary [0, 11)"),
              std::string::npos)
        << e;
  }
  EXPECT_EQ(cache.length(), 8);  // nothing dropped, nothing appended
  EXPECT_EQ(cache.next_position(), 8);
}

TEST(Generation, LeavesTheModelInTheModeItFoundItIn) {
  GPT model = test::random_model(test::small_config({"dropout=0.1"}));
  model->train();
  auto rng = at::make_generator<at::CPUGeneratorImpl>(1);
  GenerationOptions options;
  options.max_new_tokens = 3;
  generate(model, {1, 2}, options, rng);
  EXPECT_TRUE(model->is_training());
}

TEST(Generation, DropsTheOldestWhenFullAndCountsAbsolutePositions) {
  KVCache cache(1, 4);
  const auto step = [&](float value, int64_t T) {  // k = v = value, (1, 1, T, 1)
    const torch::Tensor t = torch::full({1, 1, T, 1}, value);
    cache.make_room(T);
    const auto kv = cache.append(0, t, t);
    cache.advance(T);
    return kv.first.flatten();
  };
  EXPECT_TRUE(torch::equal(step(1, 3), torch::tensor({1.0f, 1.0f, 1.0f})));
  EXPECT_TRUE(torch::equal(step(2, 1), torch::tensor({1.0f, 1.0f, 1.0f, 2.0f})));
  EXPECT_TRUE(
      torch::equal(step(3, 2), torch::tensor({1.0f, 1.0f, 2.0f, 3.0f, 3.0f}).narrow(0, 1, 4)));
  EXPECT_EQ(cache.length(), 4);
  EXPECT_EQ(cache.next_position(), 6);
  EXPECT_THROW(cache.make_room(5), std::invalid_argument);
  cache.clear();
  EXPECT_EQ(cache.next_position(), 0);
}

TEST(Generation, BatchRowsAreIndependentSamples) {
  ModelConfig c = config_of({"rope"});
  GPT model = test::random_model(c);
  GenerationOptions o;
  o.max_new_tokens = 3 * c.block_size;
  o.sampling.temperature = 0.0;  // greedy: every row must give the single-sample text
  o.num_samples = 3;
  auto rng = at::make_generator<at::CPUGeneratorImpl>(1);
  const auto batch = generate(model, {1, 2, 3}, o, rng);
  o.num_samples = 1;
  const auto single = generate(model, {1, 2, 3}, o, rng);
  ASSERT_EQ(batch.size(), 3u);
  for (const auto& row : batch) EXPECT_EQ(row, single[0]);
  // Sampled, the rows differ.
  o.sampling.temperature = 1.0;
  o.num_samples = 3;
  const auto sampled = generate(model, {1, 2, 3}, o, rng);
  EXPECT_TRUE(sampled[0] != sampled[1] || sampled[1] != sampled[2]);
}

TEST(Generation, CacheOnOrOffDrawsTheSameTokens) {
  for (const std::string pos : {"learned", "rope"}) {
    ModelConfig c = config_of({pos, "layernorm", "gelu", 0, 1});
    GPT model = test::random_model(c);
    GenerationOptions o;
    o.max_new_tokens = 2 * c.block_size;
    o.num_samples = 2;
    auto a = at::make_generator<at::CPUGeneratorImpl>(4),
         b = at::make_generator<at::CPUGeneratorImpl>(4);
    const auto cached = generate(model, {5}, o, a);
    o.use_cache = false;
    EXPECT_EQ(generate(model, {5}, o, b), cached) << pos;
  }
}

TEST(Generation, HooksTakeTheOperatorPathAndSeeEveryStep) {
  // An ablated head must stay ablated with the cache: the direct step cannot run hooks.
  ModelConfig c = config_of({"rope"});
  GPT model = test::random_model(c);
  const torch::Tensor tokens = random_tokens(2, c.block_size, c.vocab_size, 15);
  const torch::Tensor plain = step_logits(model, tokens, 2, true);
  const auto handles = zero_ablate(model, {{0, 1}, {1, 2}});
  KVCache cache = model->make_cache();
  {
    torch::NoGradGuard no_grad;
    model->forward(tokens.narrow(1, 0, 2), cache);
  }
  EXPECT_FALSE(can_decode_directly(model, cache));
  const torch::Tensor cached = step_logits(model, tokens, 2, true);
  EXPECT_LE(test::max_abs_diff(cached, step_logits(model, tokens, 2, false)), 1e-5);
  EXPECT_GT(test::max_abs_diff(cached, plain), 1e-3);
}

TEST(Generation, AStopCallbackEndsOnlyItsSample) {
  ModelConfig c = config_of({"learned"});
  GPT model = test::random_model(c);
  GenerationOptions o;
  o.max_new_tokens = 10;
  o.num_samples = 2;
  auto rng = at::make_generator<at::CPUGeneratorImpl>(2);
  int64_t calls = 0;
  const auto out = generate(model, {1}, o, rng, [&](int64_t sample, int64_t) {
    ++calls;
    return sample == 1;  // sample 0 wants no more after its first token
  });
  EXPECT_EQ(out[0].size(), 1u);
  EXPECT_EQ(out[1].size(), 10u);
  EXPECT_EQ(calls, 11);
  // When every sample has stopped, generation ends.
  const auto none = generate(model, {1}, o, rng, [](int64_t, int64_t) { return false; });
  EXPECT_EQ(none[0].size() + none[1].size(), 2u);
}

}  // namespace
}  // namespace tinylm
