// SAEs in a model: a hook point's tensor as rows and back (model/sae/hook_rows.h), splicing
// (CE loss recovered, model/sae/sae_evaluation.h), what a feature is (feature_analysis.h),
// training that stops and resumes (train/sae_training.h), and the SAELens layout on disk
// (train/run/sae_files.h).

#include <gtest/gtest.h>

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "model/sae/feature_analysis.h"
#include "model/sae/hook_rows.h"
#include "model/sae/sae_evaluation.h"
#include "model/window_loss.h"
#include "small_model.h"
#include "test_util.h"
#include "train/run/sae_files.h"
#include "train/sae_training.h"

namespace tinylm {
namespace {

torch::Tensor random_windows(int64_t n, int64_t length, int64_t vocab, uint64_t seed) {
  auto rng = at::make_generator<at::CPUGeneratorImpl>(seed);
  return torch::randint(vocab, {n, length}, rng, torch::kInt64);
}

TEST(HookRows, HookZRowsAreWhatCProjReads) {
  GPT model = test::random_model(test::small_config());  // 2 heads of 8
  const HookRows z(model, "blocks.1.attn.hook_z");
  EXPECT_TRUE(z.per_head());
  EXPECT_EQ(z.width(), 16);
  EXPECT_EQ(z.heads(), 2);
  EXPECT_EQ(z.layer(), 1);
  const torch::Tensor tokens = test::some_tokens();
  const torch::Tensor rows = z.collect(tokens);  // (B T, 16)
  ASSERT_EQ(rows.sizes(), (std::vector<int64_t>{12, 16}));
  // c_proj of the rows is the attention's output, row for row: the heads side by side in
  // c_proj's input order, the tokens in (B, T) order.
  const torch::Tensor attn_out = HookRows(model, "blocks.1.hook_attn_out").collect(tokens);
  const Linear& c_proj = model->transformer->h[1]->attn->c_proj;
  const torch::NoGradGuard no_grad;
  const torch::Tensor through = torch::matmul(rows, c_proj->weight.t()) + c_proj->bias;
  EXPECT_LE(test::max_abs_diff(through, attn_out), 1e-5);
  // And back: from_rows undoes to_rows.
  const torch::Tensor x = torch::randn({2, 2, 6, 8});
  EXPECT_TRUE(torch::equal(z.from_rows(z.to_rows(x), x), x));
}

TEST(HookRows, CollectStopsAtTheHook) {
  GPT model = test::random_model(test::small_config());
  int later = 0;
  const HookHandle count = model->add_hook("ln_f.hook_normalized", [&](const torch::Tensor& x, const std::string&) {
    ++later;
    return x;
  });
  const HookRows resid(model, "blocks.0.hook_resid_post");
  later = 0;
  EXPECT_EQ(resid.collect(test::some_tokens()).sizes(), (std::vector<int64_t>{12, 16}));
  EXPECT_EQ(later, 0);
}

TEST(HookRows, RefusesUnknownNamesAndNonTokenPoints) {
  GPT model = test::random_model(test::small_config());
  const std::string unknown = test::error_of([&] { HookRows(model, "blocks.1.attn.hook_zz"); });
  EXPECT_NE(unknown.find("did you mean \"blocks.1.attn.hook_z\""), std::string::npos) << unknown;
  const std::string pattern = test::error_of([&] { HookRows(model, "blocks.0.attn.hook_pattern"); });
  EXPECT_NE(pattern.find("not one"), std::string::npos) << pattern;
}

// The reshaping of a splice is exact: splicing each row back in place of itself is the clean
// model, so it recovers all of the CE loss. The clean loss is computed without any hook (the
// fused attention kernel), the splice's through the operator path: the two differ by float32
// rounding, a few ulps of a loss near ln 11 (~1e-6), against a span (zero-ablated - clean)
// of order 0.1.
TEST(SaeEvaluation, SplicingTheActivationItselfRecoversAllOfTheLoss) {
  GPT model = test::random_model(test::small_config());
  const torch::Tensor windows = random_windows(8, 9, 11, 5);
  for (const char* name : {"blocks.1.attn.hook_z", "blocks.0.hook_resid_post", "blocks.1.hook_mlp_out"}) {
    const HookRows hook(model, name);
    const double identity = spliced_loss(model, hook, windows, [](const torch::Tensor& r) { return r; });
    const double zero = spliced_loss(model, hook, windows, [](const torch::Tensor& r) { return torch::zeros_like(r); });
    const double clean = window_loss(model, windows, 16).mean();
    const double recovered = (zero - identity) / (zero - clean);
    EXPECT_GT(std::abs(zero - clean), 1e-3) << name;
    EXPECT_NEAR(recovered, 1.0, 1e-4) << name << ": clean " << clean << ", identity " << identity;
    // A wrong layout is not the identity: each row's numbers in reverse order (on hook_z,
    // one head's z given to the other, backwards).
    const double shuffled = spliced_loss(model, hook, windows, [](const torch::Tensor& r) { return r.flip(1); });
    EXPECT_GT(std::abs(shuffled - clean), 1e-3) << name;
  }
}

TEST(FeatureAnalysis, RepeatsContinuationsHeadsAndTokens) {
  GPT model = test::random_model(test::small_config());
  const HookRows hook(model, "blocks.1.attn.hook_z");
  auto rng = at::make_generator<at::CPUGeneratorImpl>(9);
  SparseAutoencoder sae({16, 6, 2}, rng);
  {  // feature 0 lives in head 0's slice alone; feature 1 is split 3:1 in squares
    const torch::NoGradGuard no_grad;
    sae.W_dec[0].zero_();
    sae.W_dec[0][2] = 1.0f;
    sae.W_dec[1].zero_();
    sae.W_dec[1][0] = std::sqrt(0.75f);
    sae.W_dec[1][8] = std::sqrt(0.25f);
  }
  // 1 2 3 1 2 5: position 3 repeats 1 and 2 follows, as after the first 1: it continues;
  // position 4 repeats 2, but 5 follows, not 3.
  const torch::Tensor windows = torch::tensor({{1, 2, 3, 1, 2, 5}}, torch::kInt64);
  const FeatureAnalysis a = analyse_features(model, hook, sae, windows);
  EXPECT_EQ(a.positions, 5);
  EXPECT_DOUBLE_EQ(a.repeat_rate, 2.0 / 5.0);
  EXPECT_DOUBLE_EQ(a.continues_rate, 1.0 / 5.0);
  ASSERT_EQ(a.features[0].head_shares.size(), 2u);
  EXPECT_NEAR(a.features[0].head_shares[0], 1.0, 1e-6);
  EXPECT_NEAR(a.features[1].head_shares[0], 0.75, 1e-6);
  EXPECT_NEAR(a.features[1].head_shares[1], 0.25, 1e-6);
  // Its promoted tokens are its direction through c_proj, ln_f's weight and the unembedding.
  const torch::NoGradGuard no_grad;
  const torch::Tensor& W_O = model->transformer->h[1]->attn->c_proj->weight;
  const torch::Tensor logits = torch::matmul(torch::matmul(W_O, sae.W_dec[1]) * model->transformer->ln_f->weight,
                                             model->unembedding().t());
  EXPECT_EQ(a.features[1].promoted[0].token, logits.argmax().item<int64_t>());
  EXPECT_EQ(a.features[1].suppressed[0].token, logits.argmin().item<int64_t>());
  EXPECT_NEAR(a.features[1].promoted[0].value, logits.max().item<double>(), 1e-5);
  // Firings: every position's k codes, as encode gives them.
  const torch::Tensor z = sae.encode(hook.collect(windows.slice(1, 0, 5)));
  int64_t total = 0;
  for (const FeatureSummary& f : a.features) {
    total += f.firings;
    EXPECT_EQ(f.firings, (z.select(1, f.index) > 0).sum().item<int64_t>());
    if (f.firings == 0) continue;
    EXPECT_NEAR(f.max_activation, z.select(1, f.index).max().item<double>(), 1e-6);
    EXPECT_EQ(f.top[0].position, z.select(1, f.index).argmax().item<int64_t>());
    int64_t histogram = 0;
    for (const int64_t c : f.histogram) histogram += c;
    EXPECT_EQ(histogram, f.firings);
  }
  EXPECT_EQ(total, (z > 0).sum().item<int64_t>());
}

// Training on a random model's activations: a stop asked after the first step saves and
// returns; resuming from the saved state continues to the total.
TEST(SaeTraining, StopsSavesAndResumes) {
  GPT model = test::random_model(test::small_config());
  const HookRows hook(model, "blocks.1.attn.hook_z");
  std::vector<int64_t> ids(4000);
  auto rng = at::make_generator<at::CPUGeneratorImpl>(4);
  for (auto& id : ids) id = torch::randint(11, {1}, rng).item<int64_t>();
  const TokenSequence tokens = TokenSequence::from_ids(ids);
  SaeTrainingOptions options;
  options.tokens = 4096;
  options.batch = 256;
  options.windows_per_pass = 8;
  options.buffer_passes = 8;  // 512 rows a buffer
  options.dead_tokens = 1024;
  test::TempDir dir;
  std::atomic<bool> stop{true};
  SaeTrainingHooks hooks;
  hooks.stop_requested = &stop;
  int saves = 0;
  hooks.checkpoint = [&](const SparseAutoencoder& s, const SaeProgress& p) {
    save_sae_progress(dir.path(), s, p);
    ++saves;
  };
  auto init = at::make_generator<at::CPUGeneratorImpl>(1);
  SparseAutoencoder sae({16, 32, 4}, init);
  SaeProgress progress;
  progress.tokens_total = options.tokens;
  EXPECT_FALSE(train_sae(model, hook, tokens, 8, sae, progress, options, hooks));
  EXPECT_EQ(saves, 1);
  EXPECT_EQ(progress.tokens_done, 256);
  ResumedSae resumed = load_sae_progress(dir.path());
  EXPECT_EQ(resumed.progress.tokens_done, 256);
  EXPECT_EQ(resumed.progress.steps, 1);
  EXPECT_EQ(resumed.progress.adam_steps, 1);
  EXPECT_TRUE(torch::equal(resumed.sae.W_dec, sae.W_dec));
  EXPECT_TRUE(torch::equal(resumed.progress.last_fired, progress.last_fired));
  stop = false;
  EXPECT_TRUE(train_sae(model, hook, tokens, 8, resumed.sae, resumed.progress, options, hooks));
  EXPECT_EQ(resumed.progress.tokens_done, 4096);
  EXPECT_EQ(resumed.progress.steps, 16);
  EXPECT_EQ(resumed.progress.adam_steps, 16);  // Adam's moments went on, not restarted
}

TEST(SaeTraining, DeadMeansNotFiredInTheWindow) {
  SaeProgress p;
  p.tokens_done = 10000;
  p.last_fired = torch::tensor({-1, 100, 8999, 9001, 10000}, torch::kInt64);
  // The last 1000 tokens: fired after 9000.
  EXPECT_DOUBLE_EQ(dead_fraction(p, 1000), 3.0 / 5.0);
  EXPECT_DOUBLE_EQ(dead_fraction(p, 20000), 1.0 / 5.0);  // every token seen: only "never"
}

TEST(SaeFiles, SavedInSaeLensLayoutAndReadBack) {
  test::TempDir dir;
  auto rng = at::make_generator<at::CPUGeneratorImpl>(6);
  const SparseAutoencoder sae({16, 32, 4}, rng);
  const SaeOrigin origin{"blocks.1.attn.hook_z", 1, "runs/x", "data/x.txt", 8, true};
  save_sae(dir.path(), sae, origin, {{"explained_variance", 0.5}});
  const nlohmann::json cfg = nlohmann::json::parse(std::ifstream(dir / "cfg.json"));
  EXPECT_EQ(cfg["architecture"], "topk");
  EXPECT_EQ(cfg["d_in"], 16);
  EXPECT_EQ(cfg["d_sae"], 32);
  EXPECT_EQ(cfg["activation_fn_kwargs"]["k"], 4);
  EXPECT_EQ(cfg["hook_name"], "blocks.1.attn.hook_z");
  EXPECT_EQ(cfg["reshape_activations"], "hook_z");
  const Safetensors weights = load_safetensors(dir / "sae_weights.safetensors");
  EXPECT_EQ(weights.tensors.at("W_enc").sizes(), (std::vector<int64_t>{16, 32}));
  EXPECT_EQ(weights.tensors.at("W_dec").sizes(), (std::vector<int64_t>{32, 16}));
  const LoadedSae loaded = load_sae(dir.path());
  EXPECT_TRUE(torch::equal(loaded.sae.W_enc, sae.W_enc));
  EXPECT_EQ(loaded.sae.shape.k, 4);
  EXPECT_EQ(loaded.origin.hook, "blocks.1.attn.hook_z");
  EXPECT_EQ(loaded.metrics["explained_variance"], 0.5);
  // Another architecture is refused by name.
  nlohmann::json other = cfg;
  other["architecture"] = "jumprelu";
  std::ofstream(dir / "cfg.json") << other.dump();
  const std::string error = test::error_of([&] { load_sae(dir.path()); });
  EXPECT_NE(error.find("jumprelu"), std::string::npos) << error;
  EXPECT_NE(test::error_of([&] { load_sae(dir / "nothing"); }).find("no SAE at"), std::string::npos);
}

}  // namespace
}  // namespace tinylm
