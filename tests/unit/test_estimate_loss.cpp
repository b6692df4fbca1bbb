// nanoGPT's loss estimate during training: the mean loss of `iters` random batches, worked
// out here batch by batch from the same draws, in float32 and in the steps' bfloat16.

#include <gtest/gtest.h>

#include <torch/torch.h>

#include <vector>

#include "small_model.h"
#include "train/autocast.h"
#include "train/estimate_loss.h"
#include "train/run/evaluate.h"

namespace tinylm {
namespace {

BatchSampler some_split() {
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < 200; ++i) ids.push_back((i * 7 + i / 5) % 11);
  return BatchSampler(TokenSequence::from_ids(ids), 8, 4, "val");
}

// The mean of each drawn batch's loss, computed one batch at a time under `dtype`.
double mean_of_batches(GPT& model, const BatchSampler& sampler, int64_t iters, uint64_t seed,
                       Dtype dtype) {
  torch::Generator generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  torch::NoGradGuard no_grad;
  const Autocast autocast(dtype == Dtype::kBfloat16, torch::Device(torch::kCPU));
  double total = 0.0;
  for (int64_t i = 0; i < iters; ++i) {
    const auto [x, y] = sampler.sample(generator);
    total += next_token_loss(model->forward(x), y).item<double>();
  }
  return total / static_cast<double>(iters);
}

TEST(EstimateLoss, IsTheMeanLossOfItsDrawnBatchesInTheStepsPrecision) {
  GPT model = test::random_model(test::small_config());
  const BatchSampler sampler = some_split();
  const auto estimate = [&](Dtype dtype) {
    torch::Generator generator = at::make_generator<at::CPUGeneratorImpl>(42);
    return estimate_loss(model, sampler, 5, generator, dtype);
  };
  const double float32 = estimate(Dtype::kFloat32), bfloat16 = estimate(Dtype::kBfloat16);
  EXPECT_EQ(float32, mean_of_batches(model, sampler, 5, 42, Dtype::kFloat32));
  EXPECT_EQ(bfloat16, mean_of_batches(model, sampler, 5, 42, Dtype::kBfloat16));
  EXPECT_NE(bfloat16, float32);  // bfloat16's rounding shows: the forward ran in it
}

}  // namespace
}  // namespace tinylm
