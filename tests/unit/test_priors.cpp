// The priors read from the weights against the same numbers from a forward pass.

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "model/activation_cache.h"
#include "model/analysis/head_scores.h"
#include "model/analysis/priors.h"
#include "small_model.h"

namespace tinylm {
namespace {

using test::random_model;

TEST(Priors, PositionScoresAreWhatTheHeadComputesFromPositionsAlone) {
  ModelConfig c = test::one_head_config(6, 5);
  c.n_head = 2;
  c.n_layer = 2;
  GPT model = random_model(c);
  const Priors priors = head_priors(model);
  // With a zero token embedding, block 0 sees the positions alone.
  torch::NoGradGuard no_grad;
  model->transformer->wte->weight.zero_();
  const CachedRun run = run_with_cache(model, torch::zeros({1, 6}, torch::kInt64));
  EXPECT_TRUE(torch::allclose(priors.position_scores[0],
                              run.cache.at("blocks.0.attn.hook_scores")[0], 1e-5, 1e-5));
  EXPECT_TRUE(torch::allclose(priors.position_pattern[0],
                              run.cache.at("blocks.0.attn.hook_pattern")[0], 1e-5, 1e-6));
  // Its previous-token score is the definition's, on that pattern.
  const torch::Tensor p = priors.position_pattern[0][1];  // head 1 (T, T)
  double sum = 0;
  for (int64_t i = 1; i < 6; ++i) sum += p[i][i - 1].item<double>();
  EXPECT_NEAR(priors.position_previous_token[0][1].item<double>(), sum / 5, 1e-6);
}

TEST(Priors, WithPositionsInsideAttentionTheMeanTokenStandsAtEveryPosition) {
  // rope adds nothing to the stream: its prior is what a head computes when the mean token
  // embedding stands at every position, rotated there (relative and alibi: plus their bias).
  for (const std::string pos : {"rope", "relative", "alibi"}) {
    ModelConfig c = test::small_config({"pos_encoding=" + pos, "block_size=6"}, 5);
    GPT model = random_model(c);
    {  // biases off the zeros of init, so that nothing is trivially symmetric
      torch::NoGradGuard no_grad;
      for (auto& p : model->parameters()) p.add_(0.3 * torch::randn_like(p));
    }
    const Priors priors = head_priors(model);
    ASSERT_TRUE(priors.position_scores.defined()) << pos;
    torch::NoGradGuard no_grad;
    const torch::Tensor mean = model->transformer->wte->weight.mean(0);
    model->transformer->wte->weight.copy_(mean.expand_as(model->transformer->wte->weight));
    const CachedRun run = run_with_cache(model, torch::zeros({1, 6}, torch::kInt64));
    EXPECT_TRUE(torch::allclose(priors.position_scores[0],
                                run.cache.at("blocks.0.attn.hook_scores")[0], 1e-5, 1e-5))
        << pos;
    // A rotation by i and j leaves q . k a function of i - j: the prior is shift invariant,
    // and it is not the uniform pattern of a content-free (x = 0, no bias) input.
    const torch::Tensor s = priors.position_scores[0][1];  // (T, T), head 1
    for (int64_t i = 1; i < 6; ++i) {
      for (int64_t j = 1; j <= i; ++j) {
        EXPECT_NEAR(s[i][j].item<double>(), s[i - 1][j - 1].item<double>(), 1e-5) << pos;
      }
    }
    EXPECT_GT((s[5].slice(0, 0, 6) - s[5][0]).abs().max().item<double>(), 1e-3) << pos;
  }
}

TEST(Priors, TokenScoresAreWhatTheHeadComputesFromTokensAlone) {
  ModelConfig c = test::one_head_config(6, 5);
  c.pos_encoding = PosEncoding::kNone;
  GPT model = random_model(c);
  const Priors priors = head_priors(model);
  EXPECT_FALSE(priors.position_scores.defined());
  const torch::Tensor tokens = torch::tensor({{3, 0, 4, 4, 1, 2}}, torch::kInt64);
  const CachedRun run = run_with_cache(model, tokens);
  const torch::Tensor scores = run.cache.at("blocks.0.attn.hook_scores")[0][0];  // (T, T)
  for (int64_t i = 0; i < 6; ++i) {
    for (int64_t j = 0; j <= i; ++j) {
      EXPECT_NEAR(
          scores[i][j].item<float>(),
          priors.token_scores[0][0][tokens[0][i].item<int64_t>()][tokens[0][j].item<int64_t>()]
              .item<float>(),
          1e-5);
    }
  }
}

TEST(Priors, OvCopyingEqualsTheFullVocabularyMatrixs) {
  ModelConfig c = test::one_head_config(6, 7);
  c.n_head = 2;
  GPT model = random_model(c);
  const Priors priors = head_priors(model);
  torch::NoGradGuard no_grad;
  // The V x V circuit the long way: embeddings through ln_1, W_V, W_O, ln_f's centring and
  // weight, the unembedding.
  Block& block = model->transformer->h[0];
  const torch::Tensor e =
      block->ln_1(model->transformer->wte->weight).to(torch::kFloat64);  // (V, C)
  const torch::Tensor w = block->attn->c_attn->weight.to(torch::kFloat64);
  const torch::Tensor b = block->attn->c_attn->bias.to(torch::kFloat64);
  for (int64_t h = 0; h < 2; ++h) {
    const torch::Tensor w_v = w.slice(0, 16 + 4 * h, 16 + 4 * (h + 1));  // (hs, C)
    const torch::Tensor v =
        e.matmul(w_v.t()) + b.slice(0, 16 + 4 * h, 16 + 4 * (h + 1));  // (V, hs)
    const torch::Tensor w_o =
        block->attn->c_proj->weight.slice(1, 4 * h, 4 * (h + 1)).to(torch::kFloat64);
    torch::Tensor out = v.matmul(w_o.t());  // (V, C)
    out = (out - out.mean(1, true)) * model->transformer->ln_f->weight.to(torch::kFloat64);
    const torch::Tensor m = out.matmul(model->unembedding().to(torch::kFloat64).t());  // (V, V)
    const double expected =
        m.trace().item<double>() / torch::linalg::eigvals(m).abs().sum().item<double>();
    EXPECT_NEAR(priors.ov_copying[0][h].item<double>(), expected, 1e-5);
    const double top1 = (m.argmax(1) == torch::arange(7)).to(torch::kFloat64).mean().item<double>();
    EXPECT_NEAR(priors.ov_top1[0][h].item<double>(), top1, 1e-6);
  }
}

}  // namespace
}  // namespace tinylm
