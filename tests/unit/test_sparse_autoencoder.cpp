// The TopK sparse autoencoder (model/sae/sparse_autoencoder.h): a worked example of its
// encoding and decoding, and planted features recovered by training.

#include <gtest/gtest.h>

#include <ATen/CPUGeneratorImpl.h>

#include "model/sae/sparse_autoencoder.h"

namespace tinylm {
namespace {

TEST(SparseAutoencoder, EncodesTheTopKOfTheRectifiedPreActivations) {
  auto generator = at::make_generator<at::CPUGeneratorImpl>(1);
  SparseAutoencoder sae({/*d_in=*/2, /*width=*/3, /*k=*/1}, generator);
  {
    const torch::NoGradGuard no_grad;
    sae.W_enc.copy_(torch::tensor({{1.0f, 0.0f, -1.0f}, {0.0f, 2.0f, 0.0f}}));
    sae.b_enc.copy_(torch::tensor({0.0f, -1.0f, 0.5f}));
    sae.b_dec.copy_(torch::tensor({1.0f, 1.0f}));
    sae.W_dec.copy_(torch::tensor({{1.0f, 0.0f}, {0.0f, 1.0f}, {0.6f, 0.8f}}));
  }
  // x - b_dec = (2, 1): pre = (2, 2 - 1, -2 + 0.5) = (2, 1, -1.5); ReLU, then the top 1.
  const torch::Tensor z = sae.encode(torch::tensor({{3.0f, 2.0f}}));
  EXPECT_TRUE(torch::equal(z, torch::tensor({{2.0f, 0.0f, 0.0f}})));
  // x_hat = 2 * (1, 0) + b_dec.
  EXPECT_TRUE(torch::equal(sae.decode(z), torch::tensor({{3.0f, 1.0f}})));
  // A row whose pre-activations are all negative encodes to nothing: ReLU before TopK.
  // x - b_dec = (-1, -1): pre = (-1, -3, 1.5) -> only feature 2, 1.5.
  EXPECT_TRUE(torch::equal(sae.encode(torch::tensor({{0.0f, 0.0f}})),
                           torch::tensor({{0.0f, 0.0f, 1.5f}})));
  // With k = 2 the second largest joins.
  sae.shape.k = 2;
  EXPECT_TRUE(torch::equal(sae.encode(torch::tensor({{3.0f, 2.0f}})),
                           torch::tensor({{2.0f, 1.0f, 0.0f}})));
}

TEST(SparseAutoencoder, DecoderRowsStartAndStayUnit) {
  auto generator = at::make_generator<at::CPUGeneratorImpl>(2);
  SparseAutoencoder sae({8, 16, 2}, generator);
  const torch::Tensor ones = torch::ones({16});
  EXPECT_TRUE(torch::allclose(sae.W_dec.norm(2, 1), ones, 0, 1e-6));
  EXPECT_TRUE(torch::equal(sae.W_enc, sae.W_dec.t()));
  torch::optim::Adam optimizer(sae.parameters(), torch::optim::AdamOptions(1e-2));
  train_sae_step(sae, optimizer, at::normal(0.0, 1.0, {32, 8}, generator));
  EXPECT_TRUE(torch::allclose(sae.W_dec.norm(2, 1), ones, 0, 1e-6));
}

// Activations built from 48 known unit directions in 32 dimensions (more directions than
// dimensions, as features are thought to be), 3 of them active in each, with sizes in [1, 2].
// Trained on them, the SAE must find every direction: some decoder row at cosine >= 0.9.
TEST(SparseAutoencoder, RecoversPlantedSparseDirections) {
  const int64_t d = 32, n_true = 48, active = 3;
  auto generator = at::make_generator<at::CPUGeneratorImpl>(3);
  torch::Tensor truth = at::normal(0.0, 1.0, {n_true, d}, generator);
  truth = truth / truth.norm(2, 1, true);
  const auto batch = [&](int64_t n) {
    // Each row picks `active` distinct directions: the first of a random permutation's ranks.
    const torch::Tensor ranks = at::rand({n, n_true}, generator).argsort(/*dim=*/int64_t{1});
    const torch::Tensor chosen = ranks.narrow(1, 0, active);
    const torch::Tensor sizes = 1.0 + at::rand({n, active}, generator);
    const torch::Tensor codes = torch::zeros({n, n_true}).scatter(1, chosen, sizes);
    return torch::matmul(codes, truth);
  };
  SparseAutoencoder sae({d, 2 * n_true, active}, generator);
  torch::optim::Adam optimizer(sae.parameters(), torch::optim::AdamOptions(2e-3));
  double first = 0, last = 0;
  for (int step = 0; step < 1500; ++step) {
    last = train_sae_step(sae, optimizer, batch(256)).loss;
    if (step == 0) first = last;
  }
  const torch::Tensor cosines = torch::matmul(truth, sae.W_dec.detach().t());  // rows unit
  const torch::Tensor best = std::get<0>(cosines.max(1));
  std::printf("[planted] loss %.4f -> %.4f; worst direction's best cosine %.4f\n", first, last,
              best.min().item<double>());
  EXPECT_GE(best.min().item<double>(), 0.9);
}

TEST(SparseAutoencoder, RefusesAShapeItCannotHave) {
  auto generator = at::make_generator<at::CPUGeneratorImpl>(4);
  const auto error = [&](SaeShape shape) {
    try {
      SparseAutoencoder sae(shape, generator);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error({8, 0, 1}), "the SAE's width must be >= 1 (got 0)");
  EXPECT_EQ(error({8, 16, 17}), "the SAE's k must be in [1, width = 16] (got 17)");
  EXPECT_EQ(error({8, 16, 0}), "the SAE's k must be in [1, width = 16] (got 0)");
}

}  // namespace
}  // namespace tinylm
