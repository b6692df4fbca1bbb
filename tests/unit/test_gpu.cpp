// The CUDA paths against the CPU's, on a machine with a GPU. Compiled only against a CUDA
// LibTorch (scripts/gpu-check.sh builds and runs these); the CPU suite never sees them.

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/attention.h"
#include "model/gpt.h"
#include "small_model.h"
#include "train/adamw.h"
#include "train/train_step.h"

namespace tinylm {
namespace {

const torch::Device kCuda(torch::kCUDA, 0);

ModelConfig gpu_config() {
  // No biases: the key bias's gradient is rounding noise (tests/unit/test_adamw.cpp).
  return test::small_config({"n_head=4", "n_embd=64", "block_size=32", "bias=false"}, 50);
}

class Gpu : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(torch::cuda::is_available()) << "a CUDA build on a machine without a GPU";
  }
};

// scaled_dot_product_attention (no hook) against the explicit formula (a hook on the
// pattern forces it), forward and backward.
TEST_F(Gpu, FusedAttentionEqualsTheFormula) {
  auto rng = at::make_generator<at::CPUGeneratorImpl>(1);
  const auto make = [&] { return torch::randn({2, 4, 32, 16}, rng).to(kCuda).requires_grad_(); };
  const torch::Tensor q = make(), k = make(), v = make();
  HookPoint pattern(HookScope{}, "pattern");
  const auto keep = pattern.add([](const torch::Tensor& x, const std::string&) { return x; });
  const AttentionResult fused = attention(q, k, v, true);
  const AttentionResult formula =
      attention(q, k, v, true, 0.0, false, {nullptr, &pattern, nullptr});
  EXPECT_FALSE(fused.pattern.defined());  // the fused kernel took it
  ASSERT_TRUE(formula.pattern.defined());
  EXPECT_LT(test::max_abs_diff(fused.z, formula.z), 1e-5);
  const torch::Tensor g = torch::randn_like(fused.z);
  const auto grads = [&](const torch::Tensor& z) {
    return torch::autograd::grad({z}, {q, k, v}, {g});
  };
  const auto a = grads(fused.z), b = grads(formula.z);
  for (size_t i = 0; i < 3; ++i) EXPECT_LT(test::max_abs_diff(a[i], b[i]), 1e-4) << i;
}

TEST_F(Gpu, LogitsEqualTheCpus) {
  GPT cpu = test::random_model(gpu_config()), gpu = test::random_model(gpu_config());
  gpu->to(kCuda);
  auto rng = at::make_generator<at::CPUGeneratorImpl>(2);
  const torch::Tensor x = torch::randint(50, {3, 32}, rng, torch::kInt64);
  const torch::Tensor on_cpu = cpu->forward(x), on_gpu = gpu->forward(x.to(kCuda)).cpu();
  EXPECT_LT(test::max_abs_diff(on_cpu, on_gpu), 1e-4);
}

// Five optimizer steps (the operator AdamW on the GPU, the loop on the CPU) give the same
// losses and weights.
TEST_F(Gpu, TrainingStepsEqualTheCpus) {
  TrainConfig t;
  t.batch_size = 4;
  t.gradient_accumulation_steps = 2;
  GPT cpu = test::random_model(gpu_config()), gpu = test::random_model(gpu_config());
  cpu->train(), gpu->train();
  gpu->to(kCuda);
  AdamW on_cpu(cpu, t), on_gpu(gpu, t);
  EXPECT_TRUE(on_gpu.sync_buffer().is_cuda());
  auto rng_a = at::make_generator<at::CPUGeneratorImpl>(3),
       rng_b = at::make_generator<at::CPUGeneratorImpl>(3);
  const auto batches = [](torch::Generator& rng) {
    return [&rng] {
      const torch::Tensor x = torch::randint(50, {4, 33}, rng, torch::kInt64);
      return std::pair{x.narrow(1, 0, 32), x.narrow(1, 1, 32)};
    };
  };
  for (int step = 0; step < 5; ++step) {
    const StepResult a = train_step(cpu, on_cpu, t, 1e-3, batches(rng_a));
    const StepResult b = train_step(gpu, on_gpu, t, 1e-3, batches(rng_b));
    EXPECT_NEAR(a.loss, b.loss, 1e-5) << "step " << step;
  }
  const auto theirs = gpu->named_parameters();
  for (const auto& item : cpu->named_parameters()) {
    EXPECT_LT(test::max_abs_diff(item.value(), theirs[item.key()].cpu()), 1e-5) << item.key();
  }
}

}  // namespace
}  // namespace tinylm
