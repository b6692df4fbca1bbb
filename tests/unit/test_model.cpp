// The GPT as a whole: names, init, causality, positions, and that it can learn.

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "model/gpt.h"
#include "small_model.h"
#include "train/run/evaluate.h"

namespace tinylm {
namespace {

using test::initialised_model;
using test::small_config;

TEST(Model, ParameterNamesAndShapesAreNanoGPTs) {
  GPT model = initialised_model(small_config());
  std::map<std::string, std::vector<int64_t>> expected = {{"transformer.wte.weight", {11, 16}},
                                                          {"transformer.wpe.weight", {8, 16}},
                                                          {"transformer.ln_f.weight", {16}},
                                                          {"transformer.ln_f.bias", {16}}};
  for (const std::string layer : {"0", "1"}) {
    const std::string p = "transformer.h." + layer + ".";
    expected[p + "ln_1.weight"] = {16};
    expected[p + "ln_1.bias"] = {16};
    expected[p + "attn.c_attn.weight"] = {48, 16};
    expected[p + "attn.c_attn.bias"] = {48};
    expected[p + "attn.c_proj.weight"] = {16, 16};
    expected[p + "attn.c_proj.bias"] = {16};
    expected[p + "ln_2.weight"] = {16};
    expected[p + "ln_2.bias"] = {16};
    expected[p + "mlp.c_fc.weight"] = {64, 16};
    expected[p + "mlp.c_fc.bias"] = {64};
    expected[p + "mlp.c_proj.weight"] = {16, 64};
    expected[p + "mlp.c_proj.bias"] = {16};
  }
  std::map<std::string, std::vector<int64_t>> actual;
  for (const auto& item : model->named_parameters())
    actual[item.key()] = item.value().sizes().vec();
  EXPECT_EQ(actual, expected);
}

TEST(Model, OptionsChangeTheParameterSet) {
  ModelConfig c = small_config({"pos_encoding=sinusoidal"});
  c.bias = false;
  c.tie_weights = false;
  GPT model = initialised_model(c);
  const auto params = model->named_parameters();
  EXPECT_FALSE(params.contains("transformer.wpe.weight"));  // sinusoidal is a buffer
  EXPECT_FALSE(params.contains("transformer.h.0.attn.c_attn.bias"));
  EXPECT_FALSE(params.contains("transformer.h.0.ln_1.bias"));
  ASSERT_TRUE(params.contains("lm_head.weight"));
  EXPECT_EQ(params["lm_head.weight"].sizes().vec(), (std::vector<int64_t>{11, 16}));
}

TEST(Model, Gpt2InitStatistics) {
  ModelConfig c = small_config();
  c.n_embd = 64;
  c.n_head = 4;
  c.n_layer = 8;
  c.vocab_size = 300;
  GPT model = initialised_model(c);
  auto p = model->named_parameters();
  EXPECT_NEAR(p["transformer.wte.weight"].std().item<double>(), 0.02, 0.002);
  EXPECT_NEAR(p["transformer.h.3.mlp.c_fc.weight"].std().item<double>(), 0.02, 0.002);
  EXPECT_NEAR(p["transformer.h.3.mlp.c_proj.weight"].std().item<double>(), 0.02 / std::sqrt(16.0),
              0.0005);
  EXPECT_EQ(p["transformer.h.3.attn.c_attn.bias"].abs().max().item<float>(), 0.0f);
  EXPECT_EQ(p["transformer.h.3.ln_1.weight"].min().item<float>(), 1.0f);

  c.init_std = 0.1;
  auto q = initialised_model(c)->named_parameters();
  EXPECT_NEAR(q["transformer.h.3.mlp.c_fc.weight"].std().item<double>(), 0.1, 0.01);
  EXPECT_NEAR(q["transformer.h.3.mlp.c_proj.weight"].std().item<double>(), 0.1 / std::sqrt(16.0),
              0.0025);
}

TEST(Model, FutureTokensDoNotChangePastLogits) {
  for (const std::string positions : enum_names(PosEncoding{})) {
    GPT model = test::random_model(small_config({"pos_encoding=" + positions}));
    torch::NoGradGuard no_grad;
    const torch::Tensor a = torch::tensor({{1, 2, 3, 4, 5, 6, 7, 8}}, torch::kInt64);
    torch::Tensor b = a.clone();
    b.index_put_({0, torch::indexing::Slice(5)}, torch::tensor({9, 0, 10}, torch::kInt64));
    const torch::Tensor la = model->forward(a), lb = model->forward(b);  // (1, 8, V)
    EXPECT_TRUE(torch::equal(la.slice(1, 0, 5), lb.slice(1, 0, 5))) << positions;
    EXPECT_FALSE(torch::allclose(la.slice(1, 5), lb.slice(1, 5))) << positions;
  }
}

TEST(Model, InitialLossIsNearLogVocab) {
  ModelConfig c = small_config();
  c.vocab_size = 65;
  GPT model = initialised_model(c);
  torch::NoGradGuard no_grad;
  auto rng = at::make_generator<at::CPUGeneratorImpl>(1);
  const auto x = torch::randint(65, {16, 8}, rng), y = torch::randint(65, {16, 8}, rng);
  const double loss = next_token_loss(model->forward(x), y).item<double>();
  EXPECT_NEAR(loss, std::log(65.0), 0.1);
}

TEST(Model, OverfitsOneBatch) {
  GPT model = initialised_model(small_config());
  model->train();
  auto rng = at::make_generator<at::CPUGeneratorImpl>(2);
  const auto x = torch::randint(11, {4, 8}, rng), y = torch::randint(11, {4, 8}, rng);
  torch::optim::AdamW optimizer(model->parameters(),
                                torch::optim::AdamWOptions(1e-2).weight_decay(0));
  double loss = 0.0;
  for (int step = 0; step < 300; ++step) {
    optimizer.zero_grad();
    const torch::Tensor l = next_token_loss(model->forward(x), y);
    l.backward();
    optimizer.step();
    loss = l.item<double>();
  }
  EXPECT_LT(loss, 0.05);  // from ln(11) = 2.4
}

TEST(Model, SinusoidalTableMatchesItsFormula) {
  const int64_t T = 50, C = 16;
  const torch::Tensor table = sinusoidal_positions(T, C);
  ASSERT_EQ(table.sizes().vec(), (std::vector<int64_t>{T, C}));
  for (int64_t p = 0; p < T; ++p) {
    for (int64_t i = 0; i < C / 2; ++i) {
      const double angle =
          static_cast<double>(p) / std::pow(10000.0, 2.0 * static_cast<double>(i) / C);
      EXPECT_NEAR(table[p][2 * i].item<double>(), std::sin(angle), 1e-6);
      EXPECT_NEAR(table[p][2 * i + 1].item<double>(), std::cos(angle), 1e-6);
    }
  }
  // It enters the model as a buffer, not as something the optimizer updates.
  GPT model = initialised_model(small_config({"pos_encoding=sinusoidal"}));
  for (const auto& p : model->parameters())
    EXPECT_NE(p.sizes().vec(), (std::vector<int64_t>{8, 16}));
}

TEST(Model, PositionsMatter) {
  // Without positions, a one-layer model's last logits depend on the multiset of earlier
  // tokens only (deeper, each earlier position's own causal prefix would differ).
  torch::NoGradGuard no_grad;
  const auto a = torch::tensor({{1, 2, 3, 4}}, torch::kInt64),
             b = torch::tensor({{3, 2, 1, 4}}, torch::kInt64);
  ModelConfig one_layer = small_config({"pos_encoding=none"});
  one_layer.n_layer = 1;
  GPT none = initialised_model(one_layer);
  EXPECT_TRUE(
      torch::allclose(none->forward(a).select(1, 3), none->forward(b).select(1, 3), 1e-5, 1e-5));
  GPT learned = initialised_model(small_config({"pos_encoding=learned"}));
  EXPECT_FALSE(torch::allclose(learned->forward(a).select(1, 3), learned->forward(b).select(1, 3),
                               1e-5, 1e-5));
}

TEST(Model, ValidateNamesTheBadField) {
  ModelConfig c = small_config();
  c.n_embd = 10;
  c.n_head = 4;
  try {
    c.validate();
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("model.n_embd (10) must be divisible by model.n_head (4)"),
              std::string::npos);
  }
  EXPECT_THROW(small_config({"pos_encoding=rotary"}), std::invalid_argument);
}

TEST(Model, RejectsSequencesLongerThanTheBlock) {
  // Learned positions have no row past block_size (the others extend: test_position_bias).
  GPT model = initialised_model(small_config());
  EXPECT_THROW(model->forward(torch::zeros({1, 9}, torch::kInt64)), std::invalid_argument);
}

}  // namespace
}  // namespace tinylm
