// The flat AdamW against LibTorch's own AdamW and clip_grad_norm_: the same parameters after
// several steps, weight decay on matrices and embeddings only.

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/gpt.h"
#include "small_model.h"
#include "train/adamw.h"

namespace tinylm {
namespace {

using test::small_config;

// Betas and decay unlike the defaults, so that each one's use is checked.
TrainConfig adamw_config() {
  TrainConfig t;
  t.beta1 = 0.9;
  t.beta2 = 0.95;
  t.weight_decay = 0.1;
  return t;
}

torch::Tensor loss_of(GPT& model, const torch::Tensor& x) {
  const torch::Tensor logits = model->forward(x);
  return torch::nn::functional::cross_entropy(logits.view({-1, logits.size(-1)}), x.view(-1));
}

class AdamWDecayGroups : public ::testing::TestWithParam<std::string> {};

TEST_P(AdamWDecayGroups, MatchLibTorchsAdamWWithClipping) {
  const TrainConfig t = adamw_config();
  // Without biases: the key bias has a gradient of exactly zero in theory (softmax ignores a
  // constant added to every score), so Adam turns its rounding noise into full-size steps
  // that two correct implementations need not share.
  ModelConfig c = small_config({"pos_encoding=" + GetParam()});
  c.bias = false;
  GPT ours = test::random_model(c), theirs = test::random_model(c);
  ours->train(), theirs->train();
  AdamW flat(ours, t);
  // Matrices and embeddings are decayed; T5's bias table, a matrix of biases, is not.
  std::vector<torch::Tensor> decay, no_decay;
  for (const auto& item : theirs->named_parameters()) {
    const bool table = item.key().find("rel_bias") != std::string::npos;
    (item.value().dim() >= 2 && !table ? decay : no_decay).push_back(item.value());
  }
  const auto options = [&](double wd) {
    return std::make_unique<torch::optim::AdamWOptions>(
        torch::optim::AdamWOptions(1e-2).betas({t.beta1, t.beta2}).eps(1e-8).weight_decay(wd));
  };
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, options(t.weight_decay));
  groups.emplace_back(no_decay, options(0.0));
  torch::optim::AdamW reference(std::move(groups));

  auto rng = at::make_generator<at::CPUGeneratorImpl>(8);
  for (int step = 0; step < 5; ++step) {
    const double lr = 1e-2 * (1.0 - 0.1 * step);
    const torch::Tensor x = torch::randint(11, {3, 8}, rng, torch::kInt64);
    loss_of(ours, x).backward();
    loss_of(theirs, x).backward();
    const double max_norm = 0.3;  // below the norms here: clipping acts
    const double norm = flat.clip_grad_norm(max_norm);
    const double reference_norm = torch::nn::utils::clip_grad_norm_(theirs->parameters(), max_norm);
    EXPECT_NEAR(norm, reference_norm, 1e-5 * reference_norm);
    EXPECT_GT(norm, max_norm);
    flat.step(lr);
    for (auto& group : reference.param_groups()) group.options().set_lr(lr);
    reference.step();
    flat.zero_grad();
    reference.zero_grad();
  }
  EXPECT_EQ(flat.steps(), 5);
  const auto theirs_params = theirs->named_parameters();
  for (const auto& item : ours->named_parameters()) {
    EXPECT_TRUE(torch::allclose(item.value(), theirs_params[item.key()], 1e-5, 1e-6)) << item.key();
    EXPECT_TRUE(torch::all(item.value().grad() == 0).item<bool>()) << item.key();
  }
}

INSTANTIATE_TEST_SUITE_P(Positions, AdamWDecayGroups, ::testing::Values("learned", "relative"));

TEST(AdamW, MomentsRoundTripAndMisshapenOnesAreNamed) {
  GPT model = test::random_model(small_config());
  model->train();
  AdamW a(model, TrainConfig{});
  loss_of(model, torch::ones({2, 8}, torch::kInt64)).backward();
  a.step(1e-3);
  std::map<std::string, torch::Tensor> saved;
  for (const auto& [name, t] : a.moments()) saved[name] = t.clone();
  EXPECT_EQ(saved.size(), 2 * model->parameters().size());
  GPT other = test::random_model(small_config());
  AdamW b(other, TrainConfig{});
  b.restore(saved, 1, "optimizer.safetensors");
  for (const auto& [name, t] : b.moments()) EXPECT_TRUE(torch::equal(t, saved.at(name))) << name;
  saved["exp_avg.transformer.wte.weight"] = torch::zeros({3});
  try {
    b.restore(saved, 1, "optimizer.safetensors");
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("transformer.wte.weight"), std::string::npos) << e.what();
  }
}

// The whole-buffer operators that devices other than the CPU run are the same update.
TEST(AdamW, OperatorPathEqualsTheFusedLoop) {
  const TrainConfig t = adamw_config();
  ModelConfig c = small_config();
  c.bias = false;  // the key bias's gradient is rounding noise (see the test above)
  GPT a = test::random_model(c), b = test::random_model(c);
  a->train(), b->train();
  AdamW loop(a, t), operators(b, t);
  auto rng = at::make_generator<at::CPUGeneratorImpl>(9);
  for (int step = 0; step < 5; ++step) {
    const torch::Tensor x = torch::randint(11, {3, 8}, rng, torch::kInt64);
    loss_of(a, x).backward();
    loss_of(b, x).backward();
    loop.step(1e-2);
    operators.step_with_operators(1e-2);
    loop.zero_grad(), operators.zero_grad();
  }
  const auto theirs = b->named_parameters();
  for (const auto& item : a->named_parameters()) {
    const torch::Tensor other = theirs[item.key()];
    EXPECT_FALSE(torch::equal(item.value(), test::random_model(c)->named_parameters()[item.key()]))
        << item.key() << " did not move";
    EXPECT_TRUE(torch::allclose(item.value(), other, 1e-5, 1e-6)) << item.key();
  }
  EXPECT_EQ(loop.steps(), operators.steps());
}

// Autograd writes the gradients into the first N elements of the all-reduce buffer; the
// side slots after them are free, and zero_grad clears them too.
TEST(AdamW, GradientsLiveAtTheFrontOfTheSyncBuffer) {
  GPT model = test::random_model(small_config());
  model->train();
  AdamW a(model, TrainConfig{});
  const torch::Tensor buffer = a.sync_buffer();
  EXPECT_EQ(buffer.numel(), model->num_parameters() + AdamW::kSideSlots);
  loss_of(model, torch::ones({2, 8}, torch::kInt64)).backward();
  buffer[buffer.numel() - 1] = 5.0;
  torch::Tensor flat = torch::cat([&] {
    std::vector<torch::Tensor> grads;
    for (const auto& p : model->parameters()) grads.push_back(p.grad().reshape(-1));
    return grads;
  }());
  EXPECT_NEAR(flat.norm().item<double>(),
              buffer.narrow(0, 0, model->num_parameters()).norm().item<double>(), 1e-6);
  EXPECT_GT(flat.norm().item<double>(), 0.0);
  a.zero_grad();
  EXPECT_EQ(buffer.abs().sum().item<double>(), 0.0);
}

}  // namespace
}  // namespace tinylm
