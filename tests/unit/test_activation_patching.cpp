// Activation patching: the metric's definition on the model's own logits, the sites that must
// restore everything or nothing, the batched runs against one patched run per site, and the
// errors for texts that cannot be patched.

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "model/activation_cache.h"
#include "model/analysis/activation_patching.h"
#include "small_model.h"

namespace tinylm {
namespace {

using test::random_model;
using test::small_config;

// The clean text of these tests: 7 tokens of small_config's vocabulary; the corrupted ones
// change one token.
const torch::Tensor kClean = torch::tensor({1, 5, 2, 9, 5, 0, 3}, torch::kInt64);

// kClean with the token at `position` changed to the first one that changes the model's top
// prediction after `read_at` (patching needs the two runs to disagree).
torch::Tensor corrupted_at(GPT& model, int64_t position, int64_t read_at) {
  torch::NoGradGuard no_grad;
  const int64_t clean_top =
      model->forward(kClean.unsqueeze(0))[0][read_at].argmax().item<int64_t>();
  for (int64_t token = 0; token < model->config().vocab_size; ++token) {
    torch::Tensor t = kClean.clone();
    t[position] = token;
    if (model->forward(t.unsqueeze(0))[0][read_at].argmax().item<int64_t>() != clean_top) return t;
  }
  ADD_FAILURE() << "no token at " << position << " changes the prediction after " << read_at;
  return kClean;
}

// random_model's weights (std 0.3) make logits that hardly depend on the input; three times
// that makes its predictions turn on the tokens, as a trained model's do.
GPT sensitive_model(const ModelConfig& config) {
  GPT model = random_model(config);
  torch::NoGradGuard no_grad;
  for (auto& p : model->parameters()) p.mul_(3.0);
  return model;
}

double logit_diff(const torch::Tensor& logits, int64_t P, int64_t a, int64_t b) {
  return logits[0][P][a].item<double>() - logits[0][P][b].item<double>();
}

// The metric of one run of the corrupted text with one slice of `hook` (a head, a position,
// or all of it) replaced by the clean run's: the independent reference of each site.
double patched(GPT& model, const torch::Tensor& clean, const torch::Tensor& corrupt,
               const PatchingResult& r, int64_t P, const std::string& hook, int64_t head,
               int64_t position) {
  const CachedRun clean_run = run_with_cache(model, clean.unsqueeze(0));
  torch::NoGradGuard no_grad;
  const torch::Tensor from = clean_run.cache.at(hook);
  const HookHandle h = model->add_hook(hook, [&](const torch::Tensor& x, const std::string&) {
    torch::Tensor out = x.clone();
    if (head >= 0) {
      out.select(1, head).copy_(from.select(1, head));
    } else if (position >= 0) {
      out.select(1, position).copy_(from.select(1, position));
    } else {
      out.copy_(from);
    }
    return out;
  });
  const double diff =
      logit_diff(model->forward(corrupt.unsqueeze(0)), P, r.clean_answer, r.corrupt_answer);
  return (diff - r.corrupt_diff) / (r.clean_diff - r.corrupt_diff);
}

TEST(ActivationPatching, TheAnswersAndLogitDifferencesAreTheRunsOwn) {
  GPT model = sensitive_model(small_config({"block_size=8", "bias=false"}));
  const torch::Tensor corrupt = corrupted_at(model, 3, 6);
  const PatchingResult r = activation_patching(model, kClean, corrupt, 6);
  torch::NoGradGuard no_grad;
  const torch::Tensor clean_logits = model->forward(kClean.unsqueeze(0));
  const torch::Tensor corrupt_logits = model->forward(corrupt.unsqueeze(0));
  EXPECT_EQ(r.clean_answer, clean_logits[0][6].argmax().item<int64_t>());
  EXPECT_EQ(r.corrupt_answer, corrupt_logits[0][6].argmax().item<int64_t>());
  // The same logits by other products (7 tokens, not 8; the answer's row unembedded alone),
  // summed in another order: float32 rounding apart, each sum's error at most its length
  // times 2^-24 of its scale, over every reduction on the way to a logit (the per-layer
  // products and attention's sums, then the unembedding) and two logits a difference.
  const ModelConfig& c = model->config();
  const int64_t reductions =
      c.n_layer * (c.n_embd + c.n_embd / c.n_head + c.block_size + 6 * c.n_embd) + c.n_embd;
  for (const auto& [diff, logits] :
       {std::pair{r.clean_diff, clean_logits}, std::pair{r.corrupt_diff, corrupt_logits}}) {
    const double scale = logits[0][6].abs().max().item<double>();
    EXPECT_NEAR(diff, logit_diff(logits, 6, r.clean_answer, r.corrupt_answer),
                2 * reductions * std::ldexp(1.0, -24) * scale);
  }
  EXPECT_GT(r.clean_diff, 0.0);  // a is the clean run's top token, b the corrupted run's
  EXPECT_LT(r.corrupt_diff, 0.0);
}

TEST(ActivationPatching, TheResidualAtTheOnlyChangedTokenRestoresAll) {
  // Only token 6 differs, and it is where the answer is read: every layer's resid_pre there
  // carries the whole difference, and every earlier position none of it.
  GPT model = sensitive_model(small_config({"block_size=8", "bias=false"}));
  const torch::Tensor corrupt = corrupted_at(model, 6, 6);
  const PatchingResult r = activation_patching(model, kClean, corrupt, 6);
  for (int64_t l = 0; l < 2; ++l) {
    const std::string hook = hook_name(l, "hook_resid_pre");
    EXPECT_NEAR(r.resid_pre[l][6].item<double>(), 1.0, 1e-5) << "layer " << l;
    // Earlier positions are the same in both texts: each patched run computes the corrupted
    // run again, whose metric is 0 by definition (up to float32 rounding of a forward pass).
    for (int64_t p = 0; p < 6; ++p) {
      const double reference = patched(model, kClean, corrupt, r, 6, hook, -1, p);
      EXPECT_NEAR(reference, 0.0, 1e-5) << l << " " << p;
      EXPECT_NEAR(r.resid_pre[l][p].item<double>(), reference, 1e-5) << l << " " << p;
    }
  }
  // The last layer's attention and MLP outputs each carry what its own patched run restores.
  for (const auto& [name, value] :
       {std::pair{"hook_attn_out", r.attn_out[1]}, std::pair{"hook_mlp_out", r.mlp_out[1]}}) {
    EXPECT_NEAR(value.item<double>(),
                patched(model, kClean, corrupt, r, 6, hook_name(1, name), -1, -1), 1e-5)
        << name;
  }
}

TEST(ActivationPatching, TheFirstResidualAtAChangedEarlierTokenRestoresAll) {
  // Token 2 differs; the answer is read at 5. The embedding at 2 (layer 0's resid_pre) is the
  // only place the corruption enters; later layers at 2 miss what positions 3-5 read from it.
  GPT model = sensitive_model(small_config({"block_size=8", "bias=false"}));
  const PatchingResult r = activation_patching(model, kClean, corrupted_at(model, 2, 5), 5);
  EXPECT_NEAR(r.resid_pre[0][2].item<double>(), 1.0, 1e-5);
  // Clean and corrupted alike there: nothing restored, up to float32 rounding in the batch.
  EXPECT_NEAR(r.resid_pre[0][3].item<double>(), 0.0, 1e-5);
  EXPECT_EQ(r.resid_pre.size(1), 6);  // positions 0-5: after P cannot matter
}

TEST(ActivationPatching, BatchedRunsEqualOnePatchedRunPerSite) {
  for (const std::vector<std::string>& changes :
       {std::vector<std::string>{"block_size=8", "bias=false"},
        {"block_size=8", "bias=false", "attn_only=true"}}) {
    GPT model = sensitive_model(small_config(changes));
    const torch::Tensor corrupt = corrupted_at(model, 3, 6);
    const int64_t P = 6;
    const PatchingResult r = activation_patching(model, kClean, corrupt, P, /*batch_size=*/5);
    const auto patched = [&](const std::string& hook, int64_t head, int64_t position) {
      return tinylm::patched(model, kClean, corrupt, r, P, hook, head, position);
    };
    for (int64_t l = 0; l < 2; ++l) {
      for (int64_t h = 0; h < 2; ++h)
        EXPECT_NEAR(r.heads[l][h].item<double>(), patched(hook_name(l, "attn.hook_z"), h, -1),
                    1e-5);
      for (int64_t p = 0; p <= P; ++p)
        EXPECT_NEAR(r.resid_pre[l][p].item<double>(),
                    patched(hook_name(l, "hook_resid_pre"), -1, p), 1e-5);
      EXPECT_NEAR(r.attn_out[l].item<double>(), patched(hook_name(l, "hook_attn_out"), -1, -1),
                  1e-5);
      if (model->config().attn_only) {
        EXPECT_TRUE(std::isnan(r.mlp_out[l].item<double>()));
      } else {
        EXPECT_NEAR(r.mlp_out[l].item<double>(), patched(hook_name(l, "hook_mlp_out"), -1, -1),
                    1e-5);
      }
    }
  }
}

TEST(ActivationPatching, TextsOfDifferentLengthsAreAnErrorNamingBoth) {
  GPT model = sensitive_model(small_config());
  try {
    activation_patching(model, kClean, kClean.slice(0, 0, 5), 4);
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("the clean text is 7 tokens, the corrupted 5"),
              std::string::npos)
        << e.what();
  }
}

TEST(ActivationPatching, APositionOutsideTheTextOrALongTextIsAnError) {
  GPT model = sensitive_model(small_config({"block_size=8", "bias=false"}));
  const torch::Tensor corrupt = corrupted_at(model, 3, 6);
  EXPECT_THROW(activation_patching(model, kClean, corrupt, 7), std::invalid_argument);
  EXPECT_THROW(activation_patching(model, kClean, corrupt, -1), std::invalid_argument);
  GPT short_model = sensitive_model(small_config({"block_size=6", "bias=false"}));
  EXPECT_THROW(activation_patching(short_model, kClean, corrupt, 3), std::invalid_argument);
}

TEST(ActivationPatching, RunsThatAgreeOnTheAnswerAreAnErrorNamingIt) {
  GPT model = sensitive_model(small_config({"block_size=8", "bias=false"}));
  // The same text: nothing to restore.
  try {
    activation_patching(model, kClean, kClean, 6, 64,
                        [](int64_t id) { return "'t" + std::to_string(id) + "'"; });
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("both predict 't"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tinylm
