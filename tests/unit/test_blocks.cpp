// The modern block options against their formulas: RMSNorm by a worked example, SwiGLU by
// its definition, grouped-query attention as multi-head attention with shared k and v; and
// the model-level promises: hooks with documented shapes, save and load, analyses.

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "data/char_tokenizer.h"
#include "model/activation_cache.h"
#include "model/analysis/ablation.h"
#include "model/analysis/priors.h"
#include "model/gpt.h"
#include "small_model.h"
#include "test_util.h"
#include "train/adamw.h"
#include "train/run/checkpoint.h"
#include "train/run/run_config.h"

namespace tinylm {
namespace {

using test::some_tokens;
// The modern block, every option at once.
ModelConfig modern_config() {
  return test::small_config({"n_head=4", "n_embd=24", "pos_encoding=rope", "norm=rmsnorm",
                             "mlp=swiglu", "n_kv_head=2", "bias=false"});
}

TEST(Blocks, RmsNormWorkedExample) {
  // x = (1, 2, 3, 4): mean of squares 7.5, so y = x / sqrt(7.5 + 1e-5) * w.
  Norm norm(4, /*bias=*/true, NormKind::kRmsNorm);
  EXPECT_FALSE(norm->bias.defined());  // RMSNorm has no bias
  EXPECT_FALSE(norm->centres());
  torch::NoGradGuard no_grad;
  norm->weight.copy_(torch::tensor({1.0f, 2.0f, 0.5f, -1.0f}));
  const torch::Tensor y = norm(torch::tensor({{1.0f, 2.0f, 3.0f, 4.0f}}));
  const double r = 1.0 / std::sqrt(7.5 + 1e-5);
  const std::vector<double> expected = {1 * r, 4 * r, 1.5 * r, -4 * r};
  for (int i = 0; i < 4; ++i)
    EXPECT_NEAR(y[0][i].item<double>(), expected[static_cast<size_t>(i)], 1e-6);
  // Scale-free: 10 x gives the same output.
  EXPECT_TRUE(torch::allclose(norm(torch::tensor({{10.0f, 20.0f, 30.0f, 40.0f}})), y, 1e-5, 1e-6));
}

TEST(Blocks, GeluTanhIsGpt2sApproximationAndDiffersFromTheExactGelu) {
  // One hidden unit, c_fc = c_proj = 1, no bias: the MLP is the activation itself. At x = 1
  // GPT-2's 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) = 0.841192, the exact
  // x Phi(x) = 0.841345; at x = -2, -0.045402 and -0.045500.
  ModelConfig c = test::small_config({"n_embd=1", "n_head=1", "bias=false"});
  const auto activation_of = [&](MlpKind kind, float x) {
    c.mlp = kind;
    MLP mlp(c, HookScope{});
    torch::NoGradGuard no_grad;
    mlp->c_fc->weight.fill_(0.0f);
    mlp->c_fc->weight[0][0] = 1.0f;  // one of the 4 hidden units
    mlp->c_proj->weight.fill_(0.0f);
    mlp->c_proj->weight[0][0] = 1.0f;
    return mlp(torch::tensor({{x}})).item<double>();
  };
  EXPECT_NEAR(activation_of(MlpKind::kGeluTanh, 1.0f), 0.841192, 1e-6);
  EXPECT_NEAR(activation_of(MlpKind::kGelu, 1.0f), 0.841345, 1e-6);
  EXPECT_NEAR(activation_of(MlpKind::kGeluTanh, -2.0f), -0.045402, 1e-6);
  EXPECT_NEAR(activation_of(MlpKind::kGelu, -2.0f), -0.045500, 1e-6);
}

TEST(Blocks, SwigluIsSiluOfTheGateTimesTheUpProjection) {
  ModelConfig c = modern_config();
  EXPECT_EQ(c.swiglu_hidden(), 64);  // 8 * 24 / 3 = 64, already a multiple of 8
  c.n_embd = 128;
  EXPECT_EQ(c.swiglu_hidden(), 344);  // 341.3 rounded up to a multiple of 8
  c = modern_config();
  auto rng = at::make_generator<at::CPUGeneratorImpl>(7);
  MLP mlp(c, HookScope{});
  torch::NoGradGuard no_grad;
  for (auto& p : mlp->parameters()) p.normal_(0.0, 0.3, rng);
  const int64_t H = c.swiglu_hidden();
  EXPECT_EQ(mlp->c_fc->weight.sizes().vec(), (std::vector<int64_t>{2 * H, c.n_embd}));
  EXPECT_EQ(mlp->c_proj->weight.sizes().vec(), (std::vector<int64_t>{c.n_embd, H}));
  const torch::Tensor x = torch::randn({3, c.n_embd}, rng).to(torch::kFloat64);
  const torch::Tensor w = mlp->c_fc->weight.to(torch::kFloat64),
                      w2 = mlp->c_proj->weight.to(torch::kFloat64);
  const torch::Tensor gate = x.matmul(w.slice(0, 0, H).t()),
                      up = x.matmul(w.slice(0, H, 2 * H).t());
  const torch::Tensor expected = (gate / (1 + torch::exp(-gate)) * up).matmul(w2.t());
  EXPECT_TRUE(
      torch::allclose(mlp(x.to(torch::kFloat32)).to(torch::kFloat64), expected, 1e-4, 1e-5));
  // Its parameters are GELU's 8C^2, to the rounding of H.
  ModelConfig gelu = c;
  gelu.mlp = MlpKind::kGelu;
  const auto count = [](torch::nn::Module& m) {
    int64_t n = 0;
    for (const auto& p : m.parameters()) n += p.numel();
    return n;
  };
  MLP plain(gelu, HookScope{});
  EXPECT_EQ(count(*mlp), count(*plain));  // H = 8C/3 exactly here, and no biases
}

TEST(Blocks, GroupedQueryAttentionIsMultiHeadWithSharedKeysAndValues) {
  // A GQA model (4 query heads, 2 kv heads) and an MHA model whose k, v weights repeat each
  // kv head for its two query heads compute the same function.
  ModelConfig gqa = modern_config();
  gqa.bias = true;
  gqa.norm = NormKind::kLayerNorm;
  gqa.mlp = MlpKind::kGelu;
  ModelConfig mha = gqa;
  mha.n_kv_head = 0;
  GPT a = test::random_model(gqa), b = test::random_model(mha);
  const int64_t C = gqa.n_embd, hs = gqa.head_size(), kv = gqa.kv_heads() * hs;
  EXPECT_EQ(a->transformer->h[0]->attn->c_attn->weight.size(0), C + 2 * kv);
  torch::NoGradGuard no_grad;
  auto pa = a->named_parameters(), pb = b->named_parameters();
  for (const auto& item : pa) {
    torch::Tensor target = pb[item.key()];
    if (item.key().find("c_attn") == std::string::npos) {
      target.copy_(item.value());
      continue;
    }
    const torch::Tensor w = item.value();  // (C + 2 kv, ...) rows: q, k, v
    target.narrow(0, 0, C).copy_(w.narrow(0, 0, C));
    for (int64_t part = 0; part < 2; ++part) {  // k then v
      const torch::Tensor src = w.narrow(0, C + part * kv, kv);
      for (int64_t h = 0; h < gqa.n_head; ++h) {
        const int64_t g = h / (gqa.n_head / gqa.kv_heads());
        target.narrow(0, C + part * C + h * hs, hs).copy_(src.narrow(0, g * hs, hs));
      }
    }
  }
  EXPECT_TRUE(torch::allclose(a->forward(some_tokens()), b->forward(some_tokens()), 1e-5, 1e-5));
  EXPECT_THROW(([] {
                 ModelConfig c = modern_config();
                 c.n_kv_head = 3;
                 c.validate();
               })(),
               std::invalid_argument);
}

TEST(Blocks, HooksOfTheModernBlockHaveTheirDocumentedShapes) {
  const ModelConfig c = modern_config();
  GPT model = test::random_model(c);
  const int64_t B = 2, T = 6, nh = 4, kv = 2, hs = 6, H = c.swiglu_hidden();
  const CachedRun run = run_with_cache(model, some_tokens());
  const std::map<std::string, std::vector<int64_t>> expected = {
      {"blocks.1.attn.hook_q", {B, nh, T, hs}},      {"blocks.1.attn.hook_k", {B, kv, T, hs}},
      {"blocks.1.attn.hook_v", {B, kv, T, hs}},      {"blocks.1.attn.hook_rot_k", {B, kv, T, hs}},
      {"blocks.1.attn.hook_pattern", {B, nh, T, T}}, {"blocks.1.attn.hook_z", {B, nh, T, hs}},
      {"blocks.1.mlp.hook_pre", {B, T, H}},          {"blocks.1.mlp.hook_pre_linear", {B, T, H}},
      {"blocks.1.mlp.hook_post", {B, T, H}}};
  for (const auto& [name, shape] : expected) {
    ASSERT_TRUE(run.cache.contains(name)) << name;
    EXPECT_EQ(run.cache.at(name).sizes().vec(), shape) << name;
  }
  // hook_post is what its formula says of the two before it.
  const torch::Tensor pre = run.cache.at("blocks.1.mlp.hook_pre");
  EXPECT_TRUE(torch::allclose(run.cache.at("blocks.1.mlp.hook_post"),
                              torch::silu(pre) * run.cache.at("blocks.1.mlp.hook_pre_linear")));
  // The analyses run on it: ablation by head and the weight-only priors.
  const torch::Tensor ablated = [&] {
    const auto handles = zero_ablate(model, {{1, 3}});
    torch::NoGradGuard no_grad;
    return model->forward(some_tokens());
  }();
  EXPECT_FALSE(torch::allclose(ablated, run.logits));
  const Priors priors = head_priors(model);
  EXPECT_EQ(priors.position_pattern.sizes().vec(), (std::vector<int64_t>{2, nh, 8, 8}));
  EXPECT_EQ(priors.ov_copying.sizes().vec(), (std::vector<int64_t>{2, nh}));
}

TEST(Blocks, ModernRunsSaveAndLoadBitIdentically) {
  test::TempDir dir;
  RunConfig config = load_run_config(test::source_dir() / "configs/tiny.toml");
  config.model = modern_config();
  config.model.vocab_size = 5;
  GPT model = test::random_model(config.model);
  AdamW optimizer(model, TrainConfig{});
  save_checkpoint(dir.path(), config, CharTokenizer::from_text("abcde"), model, optimizer.moments(),
                  {});
  LoadedRun run = load_run(dir.path());
  EXPECT_EQ(run.model->config().norm, NormKind::kRmsNorm);
  EXPECT_EQ(run.model->config().mlp, MlpKind::kSwiglu);
  EXPECT_EQ(run.model->config().kv_heads(), 2);
  torch::NoGradGuard no_grad;
  const auto x = torch::tensor({{0, 1, 2, 3, 4, 0, 1}}, torch::kInt64);
  EXPECT_TRUE(torch::equal(run.model->forward(x), model->forward(x)));
}

}  // namespace
}  // namespace tinylm
