// batched_matmul against torch::matmul, forward and backward.

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/ops/batched_matmul.h"

namespace tinylm {
namespace {

TEST(BatchedMatmul, EqualsMatmulForValuesAndGradients) {
  torch::manual_seed(3);
  const auto a = torch::randn({3, 4, 5, 6}, torch::requires_grad());
  const auto b0 = torch::randn({3, 4, 7, 6}, torch::requires_grad());
  const torch::Tensor b = b0.transpose(-2, -1);  // a strided view, as k^T is
  const auto g = torch::randn({3, 4, 5, 7});
  const torch::Tensor ours = batched_matmul(a, b);
  const auto grads_ours = torch::autograd::grad({ours}, {a, b0}, {g});
  const torch::Tensor ref = torch::matmul(a, b);
  const auto grads_ref = torch::autograd::grad({ref}, {a, b0}, {g});
  EXPECT_TRUE(torch::allclose(ours, ref, 1e-5, 1e-5));
  EXPECT_TRUE(torch::allclose(grads_ours[0], grads_ref[0], 1e-5, 1e-5));
  EXPECT_TRUE(torch::allclose(grads_ours[1], grads_ref[1], 1e-5, 1e-5));
}

}  // namespace
}  // namespace tinylm
