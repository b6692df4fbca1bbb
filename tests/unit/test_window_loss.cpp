// The one windowed loss against cross entropy computed by hand from the model's logits: the
// span of counted predictions, batching, and the mode it leaves the model in.

#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include <torch/torch.h>

#include "model/window_loss.h"
#include "small_model.h"

namespace tinylm {
namespace {

torch::Tensor windows(int64_t N, int64_t T1, int64_t V, uint64_t seed) {
  auto rng = at::make_generator<at::CPUGeneratorImpl>(seed);
  return torch::randint(V, {N, T1}, rng, torch::kInt64);
}

// Summed cross entropy of the predictions at [from, to), from one forward pass of all rows.
double reference_nats(GPT& model, const torch::Tensor& w, int64_t from, int64_t to) {
  torch::NoGradGuard no_grad;
  const int64_t T = w.size(1) - 1;
  const torch::Tensor logits = model->forward(w.slice(1, 0, T)).to(torch::kFloat64);  // (N, T, V)
  const torch::Tensor logp = torch::log_softmax(logits, -1);
  double nats = 0.0;
  for (int64_t n = 0; n < w.size(0); ++n) {
    for (int64_t i = from; i < to; ++i)
      nats -= logp[n][i][w[n][i + 1].item<int64_t>()].item<double>();
  }
  return nats;
}

TEST(WindowLoss, SumsTheCrossEntropyOfTheCountedPredictions) {
  GPT model = test::random_model(test::small_config());
  const torch::Tensor w = windows(5, 9, 11, 1);  // (5, T + 1), T = 8 = block_size
  const WindowLoss all = window_loss(model, w);
  EXPECT_EQ(all.predictions, 5 * 8);
  EXPECT_NEAR(all.nats, reference_nats(model, w, 0, 8), 1e-4);
  EXPECT_NEAR(all.mean(), all.nats / 40.0, 1e-12);
  const WindowLoss middle = window_loss(model, w, 32, {2, 6});
  EXPECT_EQ(middle.predictions, 5 * 4);
  EXPECT_NEAR(middle.nats, reference_nats(model, w, 2, 6), 1e-4);
  // Batches of 2 rows sum to the same as one batch of 5.
  EXPECT_NEAR(window_loss(model, w, 2).nats, all.nats, 1e-4);
}

TEST(WindowLoss, AGpt2ShapedModelIsScoredInSlicesWhoseLogitsFitTheBudget) {
  // GPT-2's vocabulary and context, narrow and shallow: one window's float32 logits are
  // 1024 x 50257 x 4 = 206 MB, so 32 windows at once would be 6.6 GB. The logits are made a
  // slice of positions at a time, the largest slice that fits the budget.
  const int64_t V = 50257, T = 1024;
  const int64_t chunk = logit_chunk_positions(V), bytes = V * static_cast<int64_t>(sizeof(float));
  EXPECT_LE(chunk * bytes, kWindowLossLogitsBytes);
  EXPECT_GT((chunk + 1) * bytes, kWindowLossLogitsBytes);
  EXPECT_LT(chunk, 2 * T);  // so this test's two windows are scored in two slices
  // The blocks take as many windows as their widest activation allows: GPT-2 small's MLP
  // is 1024 x 3072 floats (12.6 MB) a window.
  const ModelConfig gpt2 =
      test::small_config({"n_layer=12", "n_head=12", "n_embd=768", "block_size=1024"}, V);
  EXPECT_EQ(windows_per_pass(gpt2, T, 32), 5);  // 64 MB / 12.6 MB
  EXPECT_EQ(windows_per_pass(gpt2, 8, 32), 32);
  GPT model = test::random_model(
      test::small_config({"n_layer=1", "n_head=1", "n_embd=8", "block_size=1024"}, V));
  const torch::Tensor w = windows(2, T + 1, V, 3);
  const WindowLoss loss = window_loss(model, w, /*batch=*/32);
  EXPECT_EQ(loss.predictions, 2 * T);
  // The sum is the reference's: a float32 sum of T terms within a pass (epsilon x T,
  // relative) against log-softmax in double.
  torch::NoGradGuard no_grad;
  double reference = 0.0;
  for (int64_t n = 0; n < 2; ++n) {
    const torch::Tensor logp = torch::log_softmax(
        model->forward(w.slice(0, n, n + 1).slice(1, 0, T))[0].to(torch::kFloat64), -1);
    reference -= logp.gather(1, w[n].slice(0, 1, T + 1).unsqueeze(1)).sum().item<double>();
  }
  EXPECT_NEAR(loss.nats, reference, reference * T * std::numeric_limits<float>::epsilon());
}

TEST(WindowLoss, RunsInEvalModeAndRestoresTheModelsMode) {
  ModelConfig c = test::small_config({"dropout=0.5"});
  GPT model = test::random_model(c);
  const torch::Tensor w = windows(3, 9, 11, 2);
  model->train();
  const double a = window_loss(model, w).nats, b = window_loss(model, w).nats;
  EXPECT_EQ(a, b);  // no dropout: eval mode while scoring
  EXPECT_TRUE(model->is_training());
  model->eval();
  EXPECT_EQ(window_loss(model, w).nats, a);
  EXPECT_FALSE(model->is_training());
}

TEST(WindowLoss, ASpanOutsideTheWindowIsAnError) {
  GPT model = test::random_model(test::small_config());
  const torch::Tensor w = windows(2, 9, 11, 3);
  EXPECT_THROW(window_loss(model, w, 32, {4, 9}), std::invalid_argument);
  EXPECT_THROW(window_loss(model, w, 32, {5, 5}), std::invalid_argument);
}

}  // namespace
}  // namespace tinylm
