// The libraries' products (oneDNN's, model/ops/onednn_matmul.h; the BLAS's,
// model/ops/blas_matmul.h) and the linears on them (model/fused_linear.h), against float64
// products of the same values (for bfloat16, of the same bfloat16 values). The bounds come
// from the arithmetic: a float32 sum of k products is off by at most (k + 2) eps32 times the
// sum of their magnitudes (Higham, with the bias and the accumulated output as two more
// terms), and a bfloat16 output adds one rounding, 2^-8 of its value.
// The bfloat16 tests run wherever oneDNN runs bfloat16 (oneDNN 2.6: from AVX-512 on). On an
// AVX2-only CPU oneDNN 2.6 has no bfloat16 product at all: there they skip and say why, and
// the linears take autocast's path (LinearTakesIt... holds the choice everywhere). The
// float32 tests run both libraries' products on every CPU (oneDNN's wherever its API was
// built), whichever of them the linear takes here.

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <limits>

#include "model/fused_linear.h"
#include "model/linear.h"
#include "model/ops/blas_matmul.h"
#include "model/ops/onednn_matmul.h"
#include "train/autocast.h"

namespace tinylm {
namespace {

constexpr double kEps32 = std::numeric_limits<float>::epsilon();
constexpr double kBfloat16Rounding = 1.0 / 256.0;  // half of bfloat16's epsilon, 2^-7

#define SKIP_WITHOUT_ONEDNN()                                                               \
  if (!onednn_matmul_built()) GTEST_SKIP() << "this build has no oneDNN API (libdnnl-dev)"; \
  if (!onednn_bfloat16_runs()) GTEST_SKIP() << "oneDNN has no bfloat16 product on this CPU"

#define SKIP_WITHOUT_ONEDNN_API() \
  if (!onednn_matmul_built()) GTEST_SKIP() << "this build has no oneDNN API (libdnnl-dev)"

torch::Tensor bfloat16_values(torch::IntArrayRef shape) {
  return torch::randn(shape).to(torch::kBFloat16);
}

// Every |ours - exact| within its bound; the bound is a tensor of exact's shape.
void expect_within(const torch::Tensor& ours, const torch::Tensor& exact,
                   const torch::Tensor& bound, const std::string& what) {
  const torch::Tensor excess = (ours.to(torch::kFloat64) - exact).abs() - bound;
  EXPECT_LE(excess.max().item<double>(), 0.0)
      << what << ": worst error beyond its bound by " << excess.max().item<double>();
}

// The bound of a float32 sum of k products whose magnitudes sum to `magnitude`, rounded to
// bfloat16 when `bfloat16_out`.
torch::Tensor bound_of(const torch::Tensor& exact, const torch::Tensor& magnitude, int64_t k,
                       bool bfloat16_out) {
  torch::Tensor bound = (k + 2) * kEps32 * magnitude;
  if (bfloat16_out) bound = bound + kBfloat16Rounding * (exact.abs() + bound);
  return bound;
}

using ProductFn = void (*)(const torch::Tensor&, const torch::Tensor&, const torch::Tensor&,
                           torch::Tensor&, float, float);

// Products of inputs in `in_type` (bfloat16 or float32) with every layout, output type (float32
// only for float32 inputs), bias and scaling, each against float64's of the same values; in
// batches too where `batches`.
void expect_products_equal_float64(ProductFn product, torch::ScalarType in_type, bool batches) {
  struct Scales {
    float alpha, beta;
  };
  const bool f32_in = in_type == torch::kFloat32;
  for (const int64_t batch : {0, 1, 3})  // 0: plain matrices; 1: described as one
    if (batch == 0 || batches)
      for (const bool a_transposed : {false, true})
        for (const bool b_transposed : {false, true})
          for (const bool f32_out : {false, true})
            for (const bool with_bias : {false, true})
              for (const Scales s :
                   {Scales{1.0f, 0.0f}, Scales{1.0f, 1.0f}, Scales{-0.5f, 0.25f}}) {
                if (f32_in && !f32_out) continue;  // refused (RefusesWhatItCannotDo)
                const int64_t m = 37, k = 70, n = 19;
                const auto values = [&](int64_t rows, int64_t cols) {
                  return torch::randn(batch ? std::vector<int64_t>{batch, rows, cols}
                                            : std::vector<int64_t>{rows, cols})
                      .to(in_type);
                };
                const torch::Tensor a =
                    a_transposed ? values(k, m).transpose(-2, -1) : values(m, k);
                const torch::Tensor b =
                    b_transposed ? values(n, k).transpose(-2, -1) : values(k, n);
                const torch::Tensor bias = with_bias ? torch::randn({n}) : torch::Tensor();
                const auto out_type = f32_out ? torch::kFloat32 : torch::kBFloat16;
                torch::Tensor out = values(m, n).to(out_type);
                const torch::Tensor before = out.to(torch::kFloat64);
                product(a, b, bias, out, s.alpha, s.beta);
                const torch::Tensor a64 = a.to(torch::kFloat64), b64 = b.to(torch::kFloat64);
                torch::Tensor exact = torch::matmul(a64, b64);
                torch::Tensor magnitude = torch::matmul(a64.abs(), b64.abs());
                if (with_bias) {
                  exact = exact + bias.to(torch::kFloat64);
                  magnitude = magnitude + bias.to(torch::kFloat64).abs();
                }
                exact = s.alpha * exact + s.beta * before;
                magnitude = std::abs(s.alpha) * magnitude + std::abs(s.beta) * before.abs();
                const std::string what =
                    std::string(f32_in ? "float32" : "bfloat16") + " in, batch " +
                    std::to_string(batch) + ", a^T " + std::to_string(a_transposed) + ", b^T " +
                    std::to_string(b_transposed) + ", f32 out " + std::to_string(f32_out) +
                    ", bias " + std::to_string(with_bias) + ", alpha " + std::to_string(s.alpha) +
                    ", beta " + std::to_string(s.beta);
                EXPECT_EQ(out.scalar_type(), out_type) << what;
                expect_within(out, exact, bound_of(exact, magnitude, k, !f32_out), what);
              }
}

TEST(OnednnMatmul, EqualsAFloat64ProductOfItsBfloat16Inputs) {
  SKIP_WITHOUT_ONEDNN();
  torch::manual_seed(11);
  expect_products_equal_float64(&onednn_matmul, torch::kBFloat16, true);
}

TEST(OnednnMatmul, EqualsAFloat64ProductOfItsFloat32Inputs) {
  SKIP_WITHOUT_ONEDNN_API();
  torch::manual_seed(12);
  expect_products_equal_float64(&onednn_matmul, torch::kFloat32, true);
}

// K = 0: the products are an empty sum, and out is alpha bias + beta out; at beta 0 out's
// old values (NaN here) are never read. Operands in `in_type`.
void expect_empty_sum_leaves_bias_and_beta_out(ProductFn product, torch::ScalarType in_type) {
  const torch::Tensor a = torch::empty({3, 0}, in_type), b = torch::empty({0, 2}, in_type);
  const torch::Tensor bias = torch::tensor({1.0f, -2.0f});
  torch::Tensor out = torch::full({3, 2}, std::numeric_limits<float>::quiet_NaN());
  product(a, b, bias, out, 0.5f, 0.0f);
  EXPECT_TRUE(torch::equal(out, torch::tensor({0.5f, -1.0f}).expand({3, 2})));
  product(a, b, {}, out, 1.0f, 2.0f);
  EXPECT_TRUE(torch::equal(out, torch::tensor({1.0f, -2.0f}).expand({3, 2})));
}

TEST(OnednnMatmul, AnEmptySumLeavesTheBiasAndBetaTimesOut) {
  SKIP_WITHOUT_ONEDNN();
  expect_empty_sum_leaves_bias_and_beta_out(&onednn_matmul, torch::kBFloat16);
}

TEST(OnednnMatmul, RefusesWhatItCannotDo) {
  SKIP_WITHOUT_ONEDNN();
  torch::Tensor out = torch::empty({2, 3});
  const torch::Tensor a = bfloat16_values({2, 4}), b = bfloat16_values({4, 3});
  EXPECT_THROW(onednn_matmul(a.to(torch::kFloat32), b, {}, out), c10::Error);  // float32 a
  torch::Tensor bfloat16_out = torch::empty({2, 3}, torch::kBFloat16);
  EXPECT_THROW(onednn_matmul(a.to(torch::kFloat32), b.to(torch::kFloat32), {}, bfloat16_out),
               c10::Error);  // float32 products written in bfloat16
  EXPECT_THROW(onednn_matmul(a, bfloat16_values({5, 3}), {}, out), c10::Error);  // k differs
  torch::Tensor strided = torch::empty({3, 2}).t();
  EXPECT_THROW(onednn_matmul(a, b, {}, strided), c10::Error);             // out not contiguous
  EXPECT_THROW(onednn_matmul(a, b, torch::randn({4}), out), c10::Error);  // bias of 4
}

TEST(BlasMatmul, EqualsAFloat64ProductOfItsInputs) {
  torch::manual_seed(13);
  expect_products_equal_float64(&blas_matmul, torch::kFloat32, false);
}

// Operands that are neither rows nor columns contiguous (every other column) are copied into a
// layout the BLAS reads; a side of 1 takes any stride LibTorch gives it.
TEST(BlasMatmul, TakesOperandsOfAnyStrides) {
  torch::manual_seed(14);
  const torch::Tensor a = torch::randn({5, 14}).slice(1, 0, 14, 2);   // (5, 7), stride (14, 2)
  const torch::Tensor b = torch::randn({7, 6}).t().contiguous().t();  // (7, 6), columns
  torch::Tensor out = torch::empty({5, 6});
  blas_matmul(a, b, {}, out);
  const torch::Tensor exact = torch::mm(a.to(torch::kFloat64), b.to(torch::kFloat64));
  const torch::Tensor magnitude =
      torch::mm(a.abs().to(torch::kFloat64), b.abs().to(torch::kFloat64));
  expect_within(out, exact, bound_of(exact, magnitude, 7, false), "strided a, column-major b");
  const torch::Tensor row = torch::randn({1, 7}).as_strided({1, 7}, {3, 1});  // stride 3 < 7
  const torch::Tensor column = torch::randn({7, 1}).as_strided({7, 1}, {1, 1});
  torch::Tensor one = torch::empty({1, 1});
  blas_matmul(row, column, {}, one);
  EXPECT_NEAR(one.item<double>(), torch::mm(row, column).item<double>(),
              9 * kEps32 * torch::mm(row.abs(), column.abs()).item<double>());
}

TEST(BlasMatmul, AnEmptySumLeavesTheBiasAndBetaTimesOut) {
  expect_empty_sum_leaves_bias_and_beta_out(&blas_matmul, torch::kFloat32);
}

TEST(BlasMatmul, RefusesWhatItCannotDo) {
  torch::Tensor out = torch::empty({2, 3});
  const torch::Tensor a = torch::randn({2, 4}), b = torch::randn({4, 3});
  EXPECT_THROW(blas_matmul(a.to(torch::kFloat64), b, {}, out), c10::Error);  // float64 a
  EXPECT_THROW(blas_matmul(a, torch::randn({5, 3}), {}, out), c10::Error);   // k differs
  torch::Tensor strided = torch::empty({3, 2}).t();
  EXPECT_THROW(blas_matmul(a, b, {}, strided), c10::Error);             // out not contiguous
  EXPECT_THROW(blas_matmul(a, b, torch::randn({4}), out), c10::Error);  // bias of the wrong size
  EXPECT_THROW(blas_matmul(a.unsqueeze(0), b.unsqueeze(0), {}, out), c10::Error);  // batches
}

// y = linear(x, W, b) and the gradients of sum(y * g), each against float64 of the values
// the layer multiplies: in bfloat16, x and W rounded to bfloat16 and g as the bfloat16 y's
// gradient is; in float32, the values themselves. x (3, 7, 48), W (29, 48).
using LinearFn = torch::Tensor (*)(const torch::Tensor&, const torch::Tensor&,
                                   const torch::Tensor&);
void expect_linear_equals_float64(LinearFn linear, torch::ScalarType products,
                                  torch::ScalarType x_type, bool with_bias) {
  const int64_t in = 48, out = 29;
  const bool bfloat16 = products == torch::kBFloat16;
  const torch::Tensor x = torch::randn({3, 7, in}).to(x_type).requires_grad_(true);
  const torch::Tensor weight = torch::randn({out, in}, torch::requires_grad());
  const torch::Tensor bias =
      with_bias ? torch::randn({out}, torch::requires_grad()) : torch::Tensor();
  const torch::Tensor y = linear(x, weight, bias);
  ASSERT_EQ(y.sizes(), (std::vector<int64_t>{3, 7, out}));
  EXPECT_EQ(y.scalar_type(), products);
  const torch::Tensor g = torch::randn({3, 7, out}).to(products);
  std::vector<torch::Tensor> inputs{x, weight};
  if (with_bias) inputs.push_back(bias);
  const auto grads = torch::autograd::grad({y}, inputs, {g});

  const auto operand = [&](const torch::Tensor& t) {
    return t.detach().to(products).to(torch::kFloat64);
  };
  const torch::Tensor x64 = operand(x).view({-1, in}), w64 = operand(weight);
  const torch::Tensor g64 = g.to(torch::kFloat64).view({-1, out});
  const std::string what = std::string(bfloat16 ? "bfloat16" : "float32") + " products, x " +
                           (x_type == torch::kBFloat16 ? "bfloat16" : "float32") +
                           (with_bias ? ", bias" : ", no bias");

  torch::Tensor exact = torch::mm(x64, w64.t()), magnitude = torch::mm(x64.abs(), w64.abs().t());
  if (with_bias) {
    exact = exact + bias.detach().to(torch::kFloat64);
    magnitude = magnitude + bias.detach().to(torch::kFloat64).abs();
  }
  expect_within(y.view({-1, out}), exact, bound_of(exact, magnitude, in, bfloat16), what + ": y");

  // dx in the products' type (autocast's dtype for bfloat16), handed back in x's dtype.
  EXPECT_EQ(grads[0].scalar_type(), x.scalar_type()) << what;
  const torch::Tensor dx = torch::mm(g64, w64);
  expect_within(grads[0].view({-1, in}), dx,
                bound_of(dx, torch::mm(g64.abs(), w64.abs()), out, bfloat16), what + ": dx");
  // dW summed and written in float32: no bfloat16 rounding.
  EXPECT_EQ(grads[1].scalar_type(), torch::kFloat32) << what;
  const int64_t rows = x64.size(0);
  const torch::Tensor dw = torch::mm(g64.t(), x64);
  expect_within(grads[1], dw, bound_of(dw, torch::mm(g64.abs().t(), x64.abs()), rows, false),
                what + ": dW");
  if (with_bias) {
    EXPECT_EQ(grads[2].scalar_type(), torch::kFloat32) << what;
    const torch::Tensor db = g64.sum(0);
    expect_within(grads[2], db, bound_of(db, g64.abs().sum(0), rows, false), what + ": db");
  }
}

TEST(BFloat16Linear, ValuesAndGradientsEqualFloat64OfTheRoundedOperands) {
  SKIP_WITHOUT_ONEDNN();
  torch::manual_seed(5);
  for (const auto x_type : {torch::kFloat32, torch::kBFloat16})
    for (const bool with_bias : {false, true})
      expect_linear_equals_float64(bfloat16_linear, torch::kBFloat16, x_type, with_bias);
}

// A parameter's gradient accumulates over backward passes, as any linear's does.
TEST(BFloat16Linear, GradientsAccumulateAcrossBackwardPasses) {
  SKIP_WITHOUT_ONEDNN();
  torch::manual_seed(6);
  const torch::Tensor x = torch::randn({8, 16});
  const torch::Tensor weight = torch::randn({4, 16}, torch::requires_grad());
  const torch::Tensor bias = torch::randn({4}, torch::requires_grad());
  bfloat16_linear(x, weight, bias).to(torch::kFloat32).sum().backward();
  const torch::Tensor once_w = weight.grad().clone(), once_b = bias.grad().clone();
  bfloat16_linear(x, weight, bias).to(torch::kFloat32).sum().backward();
  EXPECT_TRUE(torch::equal(weight.grad(), 2 * once_w));
  EXPECT_TRUE(torch::equal(bias.grad(), 2 * once_b));
}

// Linear takes the path exactly where bfloat16_linear_takes says: under CPU autocast to
// bfloat16 on a CPU where oneDNN has bfloat16 kernels; never outside autocast.
TEST(BFloat16Linear, LinearTakesItUnderBfloat16AutocastWhereNative) {
  torch::manual_seed(7);
  Linear linear(16, 8, true);
  const torch::Tensor x = torch::randn({2, 5, 16});
  EXPECT_FALSE(bfloat16_linear_takes(x, linear->weight));
  EXPECT_EQ(linear(x).scalar_type(), torch::kFloat32);
  Autocast autocast(true, torch::Device(torch::kCPU));
  EXPECT_EQ(bfloat16_linear_takes(x, linear->weight), onednn_bfloat16_runs());
  EXPECT_FALSE(bfloat16_linear_takes(x.to(torch::kFloat64), linear->weight));
  if (!onednn_bfloat16_runs()) return;
  EXPECT_TRUE(torch::equal(linear(x), bfloat16_linear(x, linear->weight, linear->bias)));
}

torch::Tensor float32_linear_on_onednn(const torch::Tensor& x, const torch::Tensor& weight,
                                       const torch::Tensor& bias) {
  return float32_linear(x, weight, bias, Float32Products::kOnednn);
}
torch::Tensor float32_linear_on_blas(const torch::Tensor& x, const torch::Tensor& weight,
                                     const torch::Tensor& bias) {
  return float32_linear(x, weight, bias, Float32Products::kBlas);
}

TEST(Float32Linear, ValuesAndGradientsEqualFloat64OnOnednn) {
  SKIP_WITHOUT_ONEDNN_API();
  torch::manual_seed(8);
  for (const bool with_bias : {false, true})
    expect_linear_equals_float64(float32_linear_on_onednn, torch::kFloat32, torch::kFloat32,
                                 with_bias);
}

TEST(Float32Linear, ValuesAndGradientsEqualFloat64OnTheBlas) {
  torch::manual_seed(8);
  for (const bool with_bias : {false, true})
    expect_linear_equals_float64(float32_linear_on_blas, torch::kFloat32, torch::kFloat32,
                                 with_bias);
}

// The BLAS's products are the sgemm LibTorch's own linear calls: the same values, but for the
// bias's gradient (a sum of dy's rows in another order).
TEST(Float32Linear, OnTheBlasMatchesLibTorchsLinear) {
  torch::manual_seed(10);
  const torch::Tensor x = torch::randn({3, 5, 16}, torch::requires_grad());
  const torch::Tensor weight = torch::randn({8, 16}, torch::requires_grad());
  const torch::Tensor bias = torch::randn({8}, torch::requires_grad());
  const torch::Tensor g = torch::randn({3, 5, 8});
  const torch::Tensor ours = float32_linear_on_blas(x, weight, bias);
  const auto our_grads = torch::autograd::grad({ours}, {x, weight}, {g});
  const torch::Tensor theirs = torch::addmm(bias, x.view({-1, 16}), weight.t()).view({3, 5, 8});
  const auto their_grads = torch::autograd::grad({theirs}, {x, weight}, {g});
  EXPECT_TRUE(torch::equal(ours, theirs));
  EXPECT_TRUE(torch::equal(our_grads[0], their_grads[0]));
  EXPECT_TRUE(torch::equal(our_grads[1], their_grads[1]));
}

// The bias's gradient is dy's rows added in float32 one after another, column by column: the
// bits a scalar loop gives, whichever per-CPU clone of the node's loop this CPU runs (each
// keeps every column's row order). 111 rows of 67 columns leave a remainder in every vector
// width. A loop that pairs rows before adding them, or sums in double, fails it.
void expect_bias_gradient_is_the_row_order_sum(LinearFn linear, torch::ScalarType products) {
  const int64_t in = 16, out = 67;
  const torch::Tensor x = torch::randn({3, 37, in}, torch::requires_grad());
  const torch::Tensor weight = torch::randn({out, in}, torch::requires_grad());
  const torch::Tensor bias = torch::randn({out}, torch::requires_grad());
  const torch::Tensor y = linear(x, weight, bias);
  ASSERT_EQ(y.scalar_type(), products);
  // Magnitudes over 2^10 apart, so that a sum in another order or precision rounds otherwise.
  const torch::Tensor g =
      (torch::randn({3, 37, out}) * torch::pow(2.0, torch::randint(-10, 10, {3, 37, 1})))
          .to(products);
  const torch::Tensor db = torch::autograd::grad({y}, {bias}, {g})[0];
  const torch::Tensor rows = g.to(torch::kFloat32).reshape({-1, out}).contiguous();  // exact
  std::vector<float> sum(static_cast<size_t>(out), 0.0f);
  const float* r = rows.data_ptr<float>();
  for (int64_t i = 0; i < rows.size(0); ++i)
    for (int64_t c = 0; c < out; ++c) sum[static_cast<size_t>(c)] += r[i * out + c];
  EXPECT_TRUE(torch::equal(db, torch::tensor(sum)));
}

TEST(Float32Linear, BiasGradientIsTheRowOrderSum) {
  torch::manual_seed(11);
  expect_bias_gradient_is_the_row_order_sum(float32_linear_on_blas, torch::kFloat32);
  if (onednn_matmul_built())
    expect_bias_gradient_is_the_row_order_sum(float32_linear_on_onednn, torch::kFloat32);
}

TEST(BFloat16Linear, BiasGradientIsTheRowOrderSum) {
  SKIP_WITHOUT_ONEDNN();
  torch::manual_seed(12);
  expect_bias_gradient_is_the_row_order_sum(bfloat16_linear, torch::kBFloat16);
}

// Linear takes the float32 path exactly where float32_linear_takes says: float32 outside
// autocast, more than one row; with oneDNN's products where its float32 kernel beats the BLAS.
TEST(Float32Linear, LinearTakesItForFloat32OnTheFasterLibrary) {
  torch::manual_seed(9);
  Linear linear(16, 8, true);
  const torch::Tensor x = torch::randn({2, 5, 16});
  EXPECT_TRUE(float32_linear_takes(x, linear->weight));
  EXPECT_EQ(float32_products(),
            onednn_float32_beats_blas() ? Float32Products::kOnednn : Float32Products::kBlas);
  EXPECT_FALSE(float32_linear_takes(x.to(torch::kFloat64), linear->weight));
  EXPECT_FALSE(float32_linear_takes(torch::randn({1, 1, 16}), linear->weight));  // one row
  {
    Autocast autocast(true, torch::Device(torch::kCPU));
    EXPECT_FALSE(float32_linear_takes(x, linear->weight));
  }
  EXPECT_TRUE(
      torch::equal(linear(x), float32_linear(x, linear->weight, linear->bias, float32_products())));
}

}  // namespace
}  // namespace tinylm
