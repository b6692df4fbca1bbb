// The step profile: operators' self times partition the profiled time, each lands in the
// category its scope or its forward operator gives it, backward included.

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>

#include "model/kernels/kernel_choice.h"
#include "small_model.h"
#include "train/adamw.h"
#include "train/step_profile.h"
#include "train/train_step.h"

namespace tinylm {
namespace {

double category_ms(const StepProfile& p, const std::string& name) {
  for (const auto& [category, ms] : p.categories) {
    if (category == name) return ms;
  }
  ADD_FAILURE() << "no category " << name;
  return 0.0;
}

// A profile of whole training steps of a small model with every scope in it.
StepProfile profile_of(const ModelConfig& c) {
  GPT model = test::random_model(c);
  model->train();
  TrainConfig t;
  t.batch_size = 4;
  AdamW optimizer(model, t);
  auto rng = at::make_generator<at::CPUGeneratorImpl>(1);
  const BatchSource next = [&] {
    const torch::Tensor w = torch::randint(c.vocab_size, {4, c.block_size + 1}, rng, torch::kInt64);
    return std::make_pair(w.slice(1, 0, c.block_size), w.slice(1, 1));
  };
  return profile_steps([&] { train_step(model, optimizer, t, 1e-3, next); }, 2);
}

TEST(StepProfile, OperatorsAreNamedIntoTheirCategories) {
  EXPECT_EQ(category_of_op("aten::mm"), "matmul");
  EXPECT_EQ(category_of_op("aten::addmm"), "matmul");
  EXPECT_EQ(category_of_op("aten::_softmax"), "attention");
  EXPECT_EQ(category_of_op("aten::_softmax_backward_data"), "attention");
  EXPECT_EQ(category_of_op("aten::_log_softmax"), "loss");
  EXPECT_EQ(category_of_op("aten::nll_loss_forward"), "loss");
  EXPECT_EQ(category_of_op("aten::native_layer_norm_backward"), "norm");
  EXPECT_EQ(category_of_op("aten::mul"), "elementwise");
  EXPECT_EQ(category_of_op("aten::copy_"), "rest");
  EXPECT_EQ(category_of_op("torch::autograd::AccumulateGrad"), "rest");
  // The fused kernels' backward nodes, by the names LibTorch gives them.
  EXPECT_EQ(category_of_op("torch::autograd::CppNode<tinylm::(anonymous namespace)::"
                           "FusedLinear<float> >"),
            "matmul");
  EXPECT_EQ(category_of_op("torch::autograd::CppNode<tinylm::(anonymous namespace)::"
                           "FusedLinear<c10::BFloat16> >"),
            "matmul");
  EXPECT_EQ(category_of_op("torch::autograd::CppNode<tinylm::(anonymous namespace)::"
                           "CausalAttention>"),
            "attention");
  for (const char* norm : {"RowNorm<false> >", "RowNorm<true> >"}) {
    EXPECT_EQ(category_of_op(std::string("torch::autograd::CppNode<tinylm::(anonymous "
                                         "namespace)::") +
                             norm),
              "norm")
        << norm;
  }
}

TEST(StepProfile, SelfTimesPartitionTheProfiledTimeIntoEveryCategory) {
  // The operator path, where every category has operators of its own.
  ScopedKernelChoice operators(Kernels::kOperators);
  const StepProfile p =
      profile_of(test::small_config({"pos_encoding=rope", "norm=rmsnorm", "mlp=swiglu"}));
  double sum = 0.0;
  for (const auto& [category, ms] : p.categories) {
    EXPECT_GE(ms, 0.0) << category;
    sum += ms;
  }
  EXPECT_NEAR(sum, p.total_ms, 1e-9 * std::max(1.0, p.total_ms));
  EXPECT_LE(p.total_ms, p.wall_ms * 1.001);  // operators on one thread, one after another
  for (const char* c :
       {"matmul", "attention", "norm", "rotary", "activation", "loss", "optimizer"}) {
    EXPECT_GT(category_ms(p, c), 0.0) << c;
  }
  // The backward of RMSNorm is plain elementwise operators: it is counted as norm through
  // the sequence number of the forward operator that made its node.
  const bool backward_norm = std::any_of(p.ops.begin(), p.ops.end(), [](const ProfiledOp& op) {
    return op.category == "norm" && op.name.find("evaluate_function") != std::string::npos;
  });
  EXPECT_TRUE(backward_norm);
}

TEST(StepProfile, FusedKernelsCountInTheirCategoriesBackwardToo) {
  const StepProfile p =
      profile_of(test::small_config({"pos_encoding=rope", "norm=rmsnorm", "mlp=swiglu"}));
  for (const auto& [kernel, category] :
       {std::pair{"RowNorm", "norm"}, {"Swiglu", "activation"}, {"CausalAttention", "attention"}}) {
    // Init-captures: C++17 lambdas cannot capture structured bindings (clang enforces it).
    const bool found = std::any_of(
        p.ops.begin(), p.ops.end(), [kernel = kernel, category = category](const ProfiledOp& op) {
          return op.name.find(kernel) != std::string::npos && op.category == category;
        });
    EXPECT_TRUE(found) << kernel << "'s backward node in " << category;
  }
}

TEST(StepProfile, AStepOfMatmulsIsMatmul) {
  const torch::Tensor a = torch::randn({256, 256});
  const StepProfile p = profile_steps([&] { torch::mm(a, a); }, 3);
  EXPECT_GT(category_ms(p, "matmul"), 0.8 * p.total_ms);
}

}  // namespace
}  // namespace tinylm
