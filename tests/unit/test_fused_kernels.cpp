// The fused CPU kernels (model/kernels/) against three references: the operator path they
// replace (values and gradients, float32), finite differences (float64), and PyTorch itself
// (tests/kernels_reference.py on Debian's python3-torch). Then the modules: the same loss and
// gradients either way, and hooks that force the explicit path.

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdio>
#include <functional>
#include <limits>
#include <string>

#include "model/attention.h"
#include "model/kernels/causal_attention.h"
#include "model/kernels/cross_entropy.h"
#include "model/kernels/element_io.h"
#include "model/kernels/kernel_choice.h"
#include "model/kernels/matrix_vector.h"
#include "model/kernels/row_norm.h"
#include "model/kernels/swiglu.h"
#include "model/kernels/tile_gemm.h"
#include "model/norm.h"
#include "model/rope.h"
#include "small_model.h"
#include "train/autocast.h"
#include "train/run/evaluate.h"
#include "train/run/safetensors.h"

namespace tinylm {
namespace {

using Inputs = std::vector<torch::Tensor>;
using Kernel = std::function<torch::Tensor(const Inputs&)>;

// The kernel's output and the gradients of sum(output * probe) with respect to every input.
struct Evaluated {
  torch::Tensor out;
  std::vector<torch::Tensor> grads;
};

Evaluated evaluate(const Kernel& f, const Inputs& inputs_in, const torch::Tensor& probe) {
  Inputs inputs;
  for (const auto& x : inputs_in) inputs.push_back(x.detach().clone().requires_grad_(true));
  Evaluated e;
  e.out = f(inputs);
  e.grads = torch::autograd::grad({(e.out * probe).sum()}, inputs);
  e.out = e.out.detach();
  return e;
}

// Relative to the reference's largest magnitude: float32's rounding scales with the values.
double relative_diff(const torch::Tensor& a, const torch::Tensor& ref) {
  return test::max_abs_diff(a, ref) / std::max(1e-30, ref.abs().max().item<double>());
}

void expect_same(const Evaluated& ours, const Evaluated& ref, double tol) {
  EXPECT_LT(relative_diff(ours.out, ref.out), tol) << "output";
  ASSERT_EQ(ours.grads.size(), ref.grads.size());
  for (size_t i = 0; i < ours.grads.size(); ++i)
    EXPECT_LT(relative_diff(ours.grads[i], ref.grads[i]), tol) << "gradient of input " << i;
}

// A kernel that writes bfloat16 itself against its float32 result rounded once to bfloat16
// (nearest-even), LibTorch's cast. Both compute in float32, so they agree to the bit but
// where the two builds' float32 arithmetic differs in its last bit (-ffast-math lets GCC
// contract and reorder each build its own way) across a bfloat16 rounding boundary: one
// bfloat16 unit, in a few of 10^5 elements at the model's shapes. Truncating instead of
// rounding differs in half of the elements.
void expect_rounded_once(const torch::Tensor& ours, const torch::Tensor& ref, const char* what) {
  ASSERT_EQ(ours.scalar_type(), torch::kBFloat16) << what;
  const torch::Tensor a = ours.to(torch::kFloat32), b = ref.to(torch::kFloat32);
  const double unequal = (a != b).to(torch::kFloat64).mean().item<double>();
  EXPECT_LE(unequal, 0.01) << what << ": the share of the elements that differ";
  // One bfloat16 unit: 2^-7 of the magnitude at most (8 bits of significand).
  const torch::Tensor unit = torch::max(a.abs(), b.abs()) * std::ldexp(1.0, -7);
  EXPECT_TRUE(((a - b).abs() <= unit).all().item<bool>())
      << what << ": " << test::max_abs_diff(a, b);
}

// Central differences in float64 along random directions, against the autograd gradient.
void expect_finite_differences(const Kernel& f, const Inputs& inputs, uint64_t seed) {
  auto rng = at::make_generator<at::CPUGeneratorImpl>(seed);
  const torch::Tensor probe = torch::randn(f(inputs).sizes(), rng, torch::kFloat64);
  const Evaluated e = evaluate(f, inputs, probe);
  const double eps = 1e-6;
  for (size_t i = 0; i < inputs.size(); ++i) {
    for (int trial = 0; trial < 3; ++trial) {
      const torch::Tensor d = torch::randn(inputs[i].sizes(), rng, torch::kFloat64);
      Inputs plus = inputs, minus = inputs;
      plus[i] = inputs[i] + eps * d;
      minus[i] = inputs[i] - eps * d;
      const double numeric =
          ((f(plus) * probe).sum().item<double>() - (f(minus) * probe).sum().item<double>()) /
          (2 * eps);
      const double analytic = (e.grads[i] * d).sum().item<double>();
      EXPECT_NEAR(analytic, numeric, 1e-6 * std::max(1.0, std::abs(numeric)))
          << "input " << i << ", direction " << trial;
    }
  }
}

Inputs random_inputs(const std::vector<std::vector<int64_t>>& shapes, torch::Dtype dtype,
                     uint64_t seed) {
  auto rng = at::make_generator<at::CPUGeneratorImpl>(seed);
  Inputs inputs;
  for (const auto& shape : shapes) inputs.push_back(torch::randn(shape, rng, dtype));
  return inputs;
}

torch::Tensor probe_for(const torch::Tensor& out, uint64_t seed) {
  auto rng = at::make_generator<at::CPUGeneratorImpl>(seed);
  return torch::randn(out.sizes(), rng, out.scalar_type());
}

// ---- RMSNorm ----

const Kernel kRmsFused = [](const Inputs& in) { return fused_rms_norm(in[0], in[1], 1e-5); };
const Kernel kRmsOperators = [](const Inputs& in) {
  return in[0] * torch::rsqrt(in[0].square().mean(-1, true) + 1e-5) * in[1];
};

// The builds of a hand-vectorised kernel this CPU runs, widest first; said in the output, so
// that a run on a narrower CPU shows what it did not check.
std::vector<VectorIsa> builds_this_cpu_runs(const char* kernel) {
  std::vector<VectorIsa> builds;
  for (const VectorIsa isa : {VectorIsa::kAvx512, VectorIsa::kAvx2, VectorIsa::kBaseline}) {
    if (cpu_runs(isa)) builds.push_back(isa);
  }
  std::printf("%s: %zu of 3 builds checked on this CPU\n", kernel, builds.size());
  return builds;
}

TEST(FusedKernels, MatrixVectorEqualsAFloat64Product) {
  // Odd sizes (vector tails), with and without a bias, on one thread and split over two
  // (a grain that gives each thread a part of the rows), for each build this CPU can run.
  const auto builds = builds_this_cpu_runs("matrix_vector");
  ASSERT_EQ(builds.back(), VectorIsa::kBaseline);
  EXPECT_EQ(builds.front(), widest_vector_isa());
  for (const VectorIsa isa : builds) {
    auto rng = at::make_generator<at::CPUGeneratorImpl>(5);
    for (const auto& [out, in] :
         std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {7, 37}, {1001, 3}, {3001, 288}}) {
      const torch::Tensor W = torch::randn({out, in}, rng), x = torch::randn({in}, rng),
                          b = torch::randn({out}, rng);
      const torch::Tensor want = W.to(torch::kFloat64).matmul(x.to(torch::kFloat64));
      for (const int threads : {1, 2}) {
        const int before = at::get_num_threads();
        at::set_num_threads(threads);
        torch::Tensor y = torch::full({out}, 7.0f), yb = torch::full({out}, 7.0f);
        matrix_vector(W.data_ptr<float>(), out, in, x.data_ptr<float>(), nullptr,
                      y.data_ptr<float>(), isa);
        matrix_vector(W.data_ptr<float>(), out, in, x.data_ptr<float>(), b.data_ptr<float>(),
                      yb.data_ptr<float>(), isa);
        at::set_num_threads(before);
        const double scale =
            std::sqrt(static_cast<double>(in));  // float rounding of a sum of in terms
        EXPECT_LE((y.to(torch::kFloat64) - want).abs().max().item<double>(), 1e-5 * scale)
            << out << "x" << in << ", " << threads << " threads, build " << static_cast<int>(isa);
        EXPECT_LE(
            (yb.to(torch::kFloat64) - want - b.to(torch::kFloat64)).abs().max().item<double>(),
            1e-5 * scale)
            << out << "x" << in << " with bias, " << threads << " threads, build "
            << static_cast<int>(isa);
      }
    }
  }
}

TEST(FusedKernels, TileGemmEqualsAFloat64Product) {
  // Every row remainder, taken in blocks of 4, 2 and 1 after the whole blocks of 8 (AVX-512),
  // 4 (AVX2) or 2 (baseline): 7 = 4 + 2 + 1, 13 = 8 + 4 + 1; every column width (blocks of
  // 16, then 8, 4, 2, 1), A as stored and transposed, strided operands, beta 0 (C must not be
  // read: it holds NaN), 1 and a fraction, in each build this CPU runs. Bound: a k-term float
  // sum's rounding, (k + 2) eps sum |alpha a b| + |beta c| (Higham's gamma_k, with the scaling
  // and the add).
  const auto builds = builds_this_cpu_runs("tile_gemm");
  const double eps = std::numeric_limits<float>::epsilon();
  auto rng = at::make_generator<at::CPUGeneratorImpl>(11);
  int checked = 0;
  for (const VectorIsa isa : builds) {
    for (const int m : {1, 2, 3, 4, 7, 13, 16, 32}) {
      for (const int n : {1, 3, 8, 15, 24, 64, 67}) {
        for (const int k : {1, 24, 64}) {
          for (const bool transposed : {false, true}) {
            for (const float beta : {0.0f, 1.0f, 0.25f}) {
              const float alpha = 0.5f;
              // A stored (m, k + 3) or (k, m + 3), B (k, n + 5), C (m, n + 2): strided.
              const torch::Tensor A =
                  transposed ? torch::randn({k, m + 3}, rng) : torch::randn({m, k + 3}, rng);
              const torch::Tensor B = torch::randn({k, n + 5}, rng);
              const torch::Tensor C0 = torch::randn({m, n + 2}, rng);
              torch::Tensor C = beta == 0 ? torch::full({m, n + 2}, NAN) : C0.clone();
              const torch::Tensor op_a = transposed ? A.narrow(1, 0, m).t() : A.narrow(1, 0, k);
              const int64_t lda = A.size(1);
              tile_gemm<float>(m, n, k, alpha, A.data_ptr<float>(), transposed ? 1 : lda,
                               transposed ? lda : 1, B.data_ptr<float>(), B.size(1), beta,
                               C.data_ptr<float>(), C.size(1), isa);
              const torch::Tensor a64 = op_a.to(torch::kFloat64),
                                  b64 = B.narrow(1, 0, n).to(torch::kFloat64),
                                  c64 = C0.narrow(1, 0, n).to(torch::kFloat64);
              const torch::Tensor want = alpha * a64.matmul(b64) + beta * c64;
              const torch::Tensor bound =
                  (k + 2) * eps * (alpha * a64.abs().matmul(b64.abs()) + beta * c64.abs());
              const torch::Tensor got = C.narrow(1, 0, n).to(torch::kFloat64);
              EXPECT_TRUE(((got - want).abs() <= bound).all().item<bool>())
                  << m << "x" << n << "x" << k << (transposed ? " A^T" : "") << " beta " << beta
                  << ", build " << static_cast<int>(isa) << ": max error "
                  << (got - want).abs().max().item<double>();
              // The columns past n are C's own, untouched.
              if (beta != 0) {
                EXPECT_TRUE(C.narrow(1, n, 2).equal(C0.narrow(1, n, 2)));
              }
              ++checked;
            }
          }
        }
      }
    }
  }
  EXPECT_EQ(checked, static_cast<int>(builds.size()) * 8 * 7 * 3 * 2 * 3);
}

TEST(FusedKernels, TransposeIntoIsTheTranspose) {
  auto rng = at::make_generator<at::CPUGeneratorImpl>(12);
  // (rows, 7) used of a row stride 9; 37 rows: two whole bands of 16 and a part.
  for (const int rows : {5, 37}) {
    const torch::Tensor B = torch::randn({rows, 9}, rng);
    torch::Tensor out = torch::empty({7, rows});
    transpose_into(B.data_ptr<float>(), 9, rows, 7, out.data_ptr<float>());
    EXPECT_TRUE(out.equal(B.narrow(1, 0, 7).t())) << rows << " rows";
  }
}

TEST(FusedKernels, RmsNormEqualsOperatorsInValueAndGradient) {
  for (const int64_t C : {16, 37, 128}) {  // 37: no vector width divides it
    const Inputs in = random_inputs({{3, 21, C}, {C}}, torch::kFloat32, 1);
    const torch::Tensor probe = probe_for(kRmsOperators(in), 2);
    expect_same(evaluate(kRmsFused, in, probe), evaluate(kRmsOperators, in, probe), 2e-6);
  }
}

TEST(FusedKernels, RmsNormPassesFiniteDifferences) {
  expect_finite_differences(kRmsFused, random_inputs({{4, 5, 13}, {13}}, torch::kFloat64, 3), 4);
}

// A norm that writes bfloat16 for the linear after it (ln_1 and ln_2 under autocast, the cast
// that linear would make) and reads the bfloat16 gradient it hands back, against its float32
// output cast. x, the weights and their gradients stay float32: the same float32 arithmetic
// on the same values (a bfloat16 gradient widens exactly), equal to float32's rounding over
// the longest sum, the weights' over the rows.
using NormKernel = std::function<torch::Tensor(const Inputs&, bool bfloat16_out)>;

void expect_norm_rounded_once(const NormKernel& norm, const Inputs& in, uint64_t seed) {
  const Kernel ours = [&](const Inputs& x) { return norm(x, true); };
  const Kernel between_casts = [&](const Inputs& x) { return norm(x, false).to(torch::kBFloat16); };
  const torch::Tensor probe = probe_for(between_casts(in), seed);
  const Evaluated a = evaluate(ours, in, probe), b = evaluate(between_casts, in, probe);
  expect_rounded_once(a.out, b.out, "output");
  const double tol = std::numeric_limits<float>::epsilon() * (in[0].numel() / in[0].size(-1));
  for (size_t i = 0; i < a.grads.size(); ++i) {
    ASSERT_EQ(a.grads[i].scalar_type(), torch::kFloat32);
    EXPECT_LT(relative_diff(a.grads[i], b.grads[i]), tol) << "gradient of input " << i;
  }
}

TEST(FusedKernels, RmsNormWritingBfloat16IsTheFloat32KernelRoundedOnce) {
  expect_norm_rounded_once(
      [](const Inputs& in, bool narrow) { return fused_rms_norm(in[0], in[1], 1e-5, narrow); },
      random_inputs({{12, 64, 96}, {96}}, torch::kFloat32, 21), 22);
}

// ---- LayerNorm ----

const Kernel kLayerFused = [](const Inputs& in) {
  return fused_layer_norm(in[0], in[1], in.size() > 2 ? in[2] : torch::Tensor(), 1e-5);
};
const Kernel kLayerOperators = [](const Inputs& in) {
  return torch::layer_norm(in[0], {in[1].size(0)}, in[1], in.size() > 2 ? in[2] : torch::Tensor(),
                           1e-5);
};

TEST(FusedKernels, LayerNormOfAWorkedExample) {
  // x = (1, 2, 3, 4): mean 5/2, variance 5/4, so y = (x - 5/2) / sqrt(5/4 + eps) w + b. With
  // w = (1, 2, 3, 4), b = 1 and the gradient of sum(y): db = 1 each; dw = the normalised x;
  // dx = r (w - mean(w) - xh mean(w xh)), mean(w) = 5/2, mean(w xh) = r 5/4.
  const torch::Tensor x = torch::tensor({1.0, 2.0, 3.0, 4.0}, torch::kFloat64).view({1, 4});
  const torch::Tensor w = torch::tensor({1.0, 2.0, 3.0, 4.0}, torch::kFloat64);
  const torch::Tensor b = torch::ones({4}, torch::kFloat64);
  const Evaluated e = evaluate(kLayerFused, {x, w, b}, torch::ones({1, 4}, torch::kFloat64));
  const double r = 1 / std::sqrt(1.25 + 1e-5);
  for (int64_t c = 0; c < 4; ++c) {
    const double xh = (c + 1 - 2.5) * r, wc = c + 1;
    EXPECT_NEAR(e.out[0][c].item<double>(), xh * wc + 1, 1e-15) << c;
    EXPECT_NEAR(e.grads[0][0][c].item<double>(), r * (wc - 2.5 - xh * r * 1.25), 1e-14) << c;
    EXPECT_NEAR(e.grads[1][c].item<double>(), xh, 1e-15) << c;
    EXPECT_NEAR(e.grads[2][c].item<double>(), 1.0, 1e-15) << c;
  }
}

TEST(FusedKernels, LayerNormEqualsLibTorchInValueAndGradient) {
  // Both in float32 over rows of C: the mean and the variance each a sum of C terms, the
  // gradient's two sums too, then a few roundings each; dw and db sum over the 63 rows.
  // (C + 63 + 8) units of float32's epsilon, relative to the largest value.
  const double eps = std::numeric_limits<float>::epsilon();
  for (const int64_t C : {16, 37, 128}) {  // 37: no vector width divides it
    for (const bool bias : {true, false}) {
      Inputs in = random_inputs({{3, 21, C}, {C}, {C}}, torch::kFloat32, 51);
      in[0] = in[0] * 3 + 2;  // a mean and a spread away from 0 and 1
      if (!bias) in.pop_back();
      const torch::Tensor probe = probe_for(kLayerOperators(in), 52);
      const std::string at = "C " + std::to_string(C) + (bias ? ", bias" : ", no bias");
      SCOPED_TRACE(at);
      expect_same(evaluate(kLayerFused, in, probe), evaluate(kLayerOperators, in, probe),
                  (C + 63 + 8) * eps);
    }
  }
}

TEST(FusedKernels, LayerNormPassesFiniteDifferences) {
  expect_finite_differences(kLayerFused,
                            random_inputs({{4, 5, 13}, {13}, {13}}, torch::kFloat64, 53), 54);
}

TEST(FusedKernels, LayerNormWritingBfloat16IsTheFloat32KernelRoundedOnce) {
  expect_norm_rounded_once(
      [](const Inputs& in, bool narrow) {
        return fused_layer_norm(in[0], in[1], in[2], 1e-5, narrow);
      },
      random_inputs({{12, 64, 128}, {128}, {128}}, torch::kFloat32, 55), 56);
}

// ---- SwiGLU ----

const Kernel kSwigluFused = [](const Inputs& in) { return fused_swiglu(in[0]); };
const Kernel kSwigluOperators = [](const Inputs& in) {
  const auto gate_up = in[0].chunk(2, -1);
  return torch::silu(gate_up[0]) * gate_up[1];
};

TEST(FusedKernels, SwigluEqualsOperatorsInValueAndGradient) {
  for (const int64_t H : {8, 43, 344}) {
    const Inputs in = random_inputs({{2, 19, 2 * H}}, torch::kFloat32, 5);
    const torch::Tensor probe = probe_for(kSwigluOperators(in), 6);
    expect_same(evaluate(kSwigluFused, in, probe), evaluate(kSwigluOperators, in, probe), 2e-6);
  }
}

TEST(FusedKernels, SwigluPassesFiniteDifferences) {
  expect_finite_differences(kSwigluFused, random_inputs({{3, 4, 22}}, torch::kFloat64, 7), 8);
}

TEST(FusedKernels, SwigluInBfloat16IsTheFloat32KernelRoundedOnce) {
  // Under autocast the kernel reads and writes bfloat16 itself. Its result, and the gradient
  // it hands back, must be what the float32 kernel gives between casts. It widens a row in
  // chunks of kWidenedChunk: rows of two chunks, of less than one, and of two and a part.
  const Kernel between_casts = [](const Inputs& in) {
    return fused_swiglu(in[0].to(torch::kFloat32)).to(torch::kBFloat16);
  };
  for (const int64_t H : {2 * kWidenedChunk, int64_t{43}, 2 * kWidenedChunk + 44}) {
    const Inputs in = random_inputs({{12, 64, 2 * H}}, torch::kFloat32, 9);
    const torch::Tensor x = in[0].to(torch::kBFloat16);
    const torch::Tensor probe = probe_for(kSwigluOperators({x}), 10);
    const Evaluated ours = evaluate(kSwigluFused, {x}, probe);
    const Evaluated ref = evaluate(between_casts, {x}, probe);
    ASSERT_EQ(ours.out.scalar_type(), torch::kBFloat16);
    ASSERT_EQ(ours.grads[0].scalar_type(), torch::kBFloat16);
    const std::string at = " at H " + std::to_string(H);
    expect_rounded_once(ours.out, ref.out, ("output" + at).c_str());
    expect_rounded_once(ours.grads[0], ref.grads[0], ("gradient" + at).c_str());
  }
}

// ---- cross entropy ----

Kernel cross_entropy_fused(const torch::Tensor& targets) {
  return [targets](const Inputs& in) { return fused_cross_entropy(in[0], targets); };
}

Kernel cross_entropy_libtorch(const torch::Tensor& targets) {
  return [targets](const Inputs& in) { return torch::cross_entropy_loss(in[0], targets); };
}

TEST(FusedKernels, CrossEntropyOfAWorkedExample) {
  // Row 0: z = (0, ln 3), target 0: softmax (1/4, 3/4), loss ln 4. Row 1: z = (ln 3, 0),
  // target 0: softmax (3/4, 1/4), loss ln 4/3. The mean's gradient: (softmax - onehot) / 2.
  const double ln3 = std::log(3.0);
  const torch::Tensor z = torch::tensor({0.0, ln3, ln3, 0.0}, torch::kFloat64).view({2, 2});
  const torch::Tensor t = torch::tensor({0, 0}, torch::kLong);
  const torch::Tensor probe = torch::ones({}, torch::kFloat64);
  const Evaluated e = evaluate(cross_entropy_fused(t), {z}, probe);
  EXPECT_NEAR(e.out.item<double>(), (std::log(4.0) + std::log(4.0 / 3.0)) / 2, 1e-15);
  const torch::Tensor expected =
      torch::tensor({-3.0 / 8, 3.0 / 8, -1.0 / 8, 1.0 / 8}, torch::kFloat64).view({2, 2});
  EXPECT_LT(test::max_abs_diff(e.grads[0], expected), 1e-15);
}

TEST(FusedKernels, CrossEntropyEqualsLibTorchInValueAndGradient) {
  // Logits up to ~100: without the row's max taken out, exp overflows float32. Both sides
  // round: a row's lse sums V exponentials (V + 2 units of float32's epsilon, relative),
  // then adds the max and subtracts the target's logit (a unit of each's magnitude); the
  // gradient is a probability, at most 1, of the same exponent, over N.
  const double eps = std::numeric_limits<float>::epsilon();
  for (const int64_t V : {1, 7, 65, 1000}) {
    for (const double magnitude : {1.0, 30.0}) {
      const int64_t N = 37;
      const torch::Tensor z = random_inputs({{N, V}}, torch::kFloat32, 31)[0] * magnitude;
      auto rng = at::make_generator<at::CPUGeneratorImpl>(V);
      const torch::Tensor t = torch::randint(V, {N}, rng, torch::kLong);
      const torch::Tensor probe = torch::ones({}, torch::kFloat32);
      const Evaluated ours = evaluate(cross_entropy_fused(t), {z}, probe);
      const Evaluated ref = evaluate(cross_entropy_libtorch(t), {z}, probe);
      const double zmax = z.abs().max().item<double>();
      const double bound = 2 * (V + 8 + 3 * zmax) * eps;
      const std::string at = "V " + std::to_string(V) + ", logits x" + std::to_string(magnitude);
      EXPECT_NEAR(ours.out.item<double>(), ref.out.item<double>(), bound) << at;
      EXPECT_LT(test::max_abs_diff(ours.grads[0], ref.grads[0]), bound / N) << at;
    }
  }
}

TEST(FusedKernels, CrossEntropyPassesFiniteDifferences) {
  const torch::Tensor t = torch::tensor({3, 0, 4, 4, 1}, torch::kLong);
  expect_finite_differences(cross_entropy_fused(t), random_inputs({{5, 6}}, torch::kFloat64, 32),
                            33);
}

TEST(FusedKernels, CrossEntropyOfBfloat16IsTheFloat32KernelsRoundedOnce) {
  // Under autocast the logits are bfloat16: the loss is float32 (autocast's cross_entropy
  // casts them up), the gradient handed back bfloat16, the float32 one rounded once. The
  // model's shape: 384 rows of 65.
  const int64_t N = 384, V = 65;
  const torch::Tensor z =
      (random_inputs({{N, V}}, torch::kFloat32, 34)[0] * 4).to(torch::kBFloat16);
  auto rng = at::make_generator<at::CPUGeneratorImpl>(35);
  const torch::Tensor t = torch::randint(V, {N}, rng, torch::kLong);
  const torch::Tensor probe = torch::ones({}, torch::kFloat32);
  const Kernel between_casts = [t](const Inputs& in) {
    return fused_cross_entropy(in[0].to(torch::kFloat32), t);
  };
  const Evaluated ours = evaluate(cross_entropy_fused(t), {z}, probe);
  const Evaluated ref = evaluate(between_casts, {z}, probe);
  ASSERT_EQ(ours.out.scalar_type(), torch::kFloat32);
  const double eps = std::numeric_limits<float>::epsilon();
  EXPECT_NEAR(ours.out.item<double>(), ref.out.item<double>(),
              (V + 8 + 3 * z.to(torch::kFloat32).abs().max().item<double>()) * eps);
  expect_rounded_once(ours.grads[0], ref.grads[0].to(torch::kBFloat16), "gradient");
}

TEST(FusedKernels, CrossEntropyNamesATargetOutsideTheVocabulary) {
  const torch::Tensor z = torch::zeros({3, 5});
  for (const int64_t bad : {int64_t{5}, int64_t{-1}, int64_t{-100}}) {
    try {
      fused_cross_entropy(z, torch::tensor({int64_t{0}, bad, int64_t{2}}));
      ADD_FAILURE() << "target " << bad << " was taken";
    } catch (const c10::Error& e) {
      EXPECT_NE(std::string(e.what()).find("target " + std::to_string(bad) +
                                           " at row 1 is outside the vocabulary [0, 5)"),
                std::string::npos)
          << e.what();
    }
  }
}

// ---- causal attention ----

struct AttentionShape {
  int64_t n_head, n_kv, hs;
  bool rotary;
};

// The operator path on the same qkv: split, heads, rotation, attention(), heads joined.
Kernel attention_operators(const AttentionShape& s, const RopeTables& tables) {
  return [s, tables](const Inputs& in) {
    const torch::Tensor& qkv = in[0];
    const int64_t B = qkv.size(0), T = qkv.size(1), hs = s.hs;
    const auto parts = qkv.split_with_sizes({s.n_head * hs, s.n_kv * hs, s.n_kv * hs}, 2);
    const auto heads = [&](const torch::Tensor& t, int64_t n) {
      return t.view({B, T, n, hs}).transpose(1, 2);
    };
    torch::Tensor q = heads(parts[0], s.n_head), k = heads(parts[1], s.n_kv),
                  v = heads(parts[2], s.n_kv);
    if (s.rotary) {
      RopeTables t = tables;
      t.cos_full = t.cos_full.to(qkv.scalar_type());
      t.sin_signed = t.sin_signed.to(qkv.scalar_type());
      q = apply_rope(q, t), k = apply_rope(k, t);
    }
    k = k.repeat_interleave(s.n_head / s.n_kv, 1), v = v.repeat_interleave(s.n_head / s.n_kv, 1);
    const torch::Tensor z = attention(q, k, v, /*causal=*/true).z;  // (B, nh, T, hs)
    return z.transpose(1, 2).reshape({B, T, s.n_head * hs});
  };
}

Kernel attention_fused(const AttentionShape& s, const RopeTables& tables) {
  return [s, tables](const Inputs& in) {
    const auto type = in[0].scalar_type();
    return fused_causal_attention(in[0], s.n_head, s.n_kv,
                                  s.rotary ? tables.cos.to(type) : torch::Tensor(),
                                  s.rotary ? tables.sin.to(type) : torch::Tensor());
  };
}

TEST(FusedKernels, CausalAttentionEqualsOperatorsInValueAndGradient) {
  for (const AttentionShape s : {AttentionShape{4, 4, 32, true}, AttentionShape{4, 2, 8, true},
                                 AttentionShape{3, 1, 6, false}, AttentionShape{2, 2, 16, false}}) {
    // One band of rows, and two or five with the last one short (the kernel works in 16-row
    // bands).
    for (const int64_t T : {11, 23, 75}) {
      const int64_t width = (s.n_head + 2 * s.n_kv) * s.hs;
      const RopeTables tables = rope_tables(80, s.hs);  // longer than T, as a model's are
      const Inputs in = random_inputs({{3, T, width}}, torch::kFloat32, 9);
      const torch::Tensor probe = probe_for(attention_operators(s, tables)(in), 10);
      SCOPED_TRACE("T " + std::to_string(T) + ", n_head " + std::to_string(s.n_head) + ", n_kv " +
                   std::to_string(s.n_kv) + (s.rotary ? ", rotary" : ""));
      expect_same(evaluate(attention_fused(s, tables), in, probe),
                  evaluate(attention_operators(s, tables), in, probe), 2e-6);
    }
  }
}

TEST(FusedKernels, CausalAttentionPassesFiniteDifferences) {
  for (const AttentionShape s : {AttentionShape{2, 1, 4, true}, AttentionShape{2, 2, 6, false}}) {
    for (const int64_t T : {7, 41}) {
      const RopeTables tables = rope_tables(T, s.hs);
      expect_finite_differences(
          attention_fused(s, tables),
          random_inputs({{2, T, (s.n_head + 2 * s.n_kv) * s.hs}}, torch::kFloat64, 11), 12);
    }
  }
}

TEST(FusedKernels, CausalAttentionIsCausal) {
  // Changing the last position's q, k and v changes no earlier output.
  const AttentionShape s{2, 2, 8, true};
  const RopeTables tables = rope_tables(8, s.hs);
  Inputs in = random_inputs({{1, 8, 6 * 8}}, torch::kFloat32, 13);
  const torch::Tensor before = attention_fused(s, tables)(in);
  in[0][0][7].add_(1.0);
  const torch::Tensor after = attention_fused(s, tables)(in);
  EXPECT_TRUE(torch::equal(before.slice(1, 0, 7), after.slice(1, 0, 7)));
  EXPECT_FALSE(torch::equal(before[0][7], after[0][7]));
}

TEST(FusedKernels, CausalAttentionInBfloat16IsTheFloat32KernelRoundedOnce) {
  // Under autocast attention reads c_attn's bfloat16 output and writes c_proj's bfloat16
  // input itself, its gradients too, computing in float32 between (the rotary tables stay
  // float32): what the float32 kernel gives between casts.
  for (const bool rotary : {true, false}) {
    SCOPED_TRACE(rotary ? "rotary" : "no rotation");
    const int64_t n_head = 4, hs = 24;
    const RopeTables tables = rope_tables(64, hs);
    const torch::Tensor cos = rotary ? tables.cos : torch::Tensor();
    const torch::Tensor sin = rotary ? tables.sin : torch::Tensor();
    const Kernel ours = [&](const Inputs& in) {
      return fused_causal_attention(in[0], n_head, n_head, cos, sin);
    };
    const Kernel between_casts = [&](const Inputs& in) {
      return fused_causal_attention(in[0].to(torch::kFloat32), n_head, n_head, cos, sin)
          .to(torch::kBFloat16);
    };
    const torch::Tensor qkv =
        random_inputs({{12, 64, 3 * n_head * hs}}, torch::kFloat32, 23)[0].to(torch::kBFloat16);
    const torch::Tensor probe = probe_for(between_casts({qkv}), 24);
    const Evaluated a = evaluate(ours, {qkv}, probe), b = evaluate(between_casts, {qkv}, probe);
    expect_rounded_once(a.out, b.out, "output");
    expect_rounded_once(a.grads[0], b.grads[0], "gradient");
  }
}

// ---- the modules ----

// Loss and every parameter's gradient of one forward and backward, under `kernels`.
std::pair<double, std::vector<torch::Tensor>> loss_and_grads(GPT& model, Kernels kernels,
                                                             const torch::Tensor& tokens) {
  ScopedKernelChoice choice(kernels);
  model->zero_grad();
  const torch::Tensor x = tokens.slice(1, 0, -1), y = tokens.slice(1, 1);
  const torch::Tensor loss = next_token_loss(model->forward(x), y);
  loss.backward();
  std::vector<torch::Tensor> grads;
  for (const auto& p : model->parameters()) grads.push_back(p.grad().clone());
  return {loss.item<double>(), grads};
}

TEST(FusedKernels, ModelLossAndGradientsEqualTheOperatorPath) {
  for (const std::vector<std::string>& changes :
       {std::vector<std::string>{"pos_encoding=rope", "norm=rmsnorm", "mlp=swiglu"},
        {"pos_encoding=rope", "norm=rmsnorm", "mlp=swiglu", "n_kv_head=1"},
        {"pos_encoding=learned", "norm=layernorm", "mlp=gelu"}}) {
    GPT model = test::random_model(test::small_config(changes));
    model->train();  // dropout 0: training takes the kernels too
    const torch::Tensor tokens = torch::randint(11, {3, 9}, torch::kInt64);
    const auto fused = loss_and_grads(model, Kernels::kFused, tokens);
    const auto operators = loss_and_grads(model, Kernels::kOperators, tokens);
    EXPECT_NEAR(fused.first, operators.first, 1e-6 * std::abs(operators.first));
    for (size_t i = 0; i < fused.second.size(); ++i)
      EXPECT_LT(relative_diff(fused.second[i], operators.second[i]), 1e-5) << "parameter " << i;
  }
}

TEST(FusedKernels, ANormBeforeALinearWritesBfloat16UnderAutocastOnly) {
  // ln_1 and ln_2 feed c_attn and c_fc, which under bfloat16 autocast cast their input: the
  // fused norm makes that cast itself there, and only there.
  Norm norm(96, /*bias=*/false, NormKind::kRmsNorm);
  norm->weight.data().uniform_(0.5, 1.5);
  const torch::Tensor x = random_inputs({{2, 9, 96}}, torch::kFloat32, 25)[0];
  const torch::Tensor plain = norm->forward(x);
  EXPECT_TRUE(torch::equal(norm->forward_to_linear(x), plain)) << "without autocast";
  torch::Tensor narrow;
  {
    const Autocast autocast(true, torch::kCPU);
    EXPECT_EQ(norm->forward(x).scalar_type(), torch::kFloat32) << "ln_f's, which no linear casts";
    narrow = norm->forward_to_linear(x);
  }
  expect_rounded_once(narrow, plain.to(torch::kBFloat16), "under autocast");
  ScopedKernelChoice operators(Kernels::kOperators);
  const Autocast autocast(true, torch::kCPU);
  EXPECT_EQ(norm->forward_to_linear(x).scalar_type(), torch::kFloat32)
      << "the operators leave the cast to the linear";
}

TEST(FusedKernels, AHookInsideAttentionTakesTheExplicitPath) {
  GPT model = test::random_model(test::small_config({"pos_encoding=rope"}));
  const torch::Tensor tokens = test::some_tokens();
  torch::NoGradGuard no_grad;
  const torch::Tensor plain = model->forward(tokens);
  int calls = 0;
  {
    // A reading hook fires, and sees the pattern; the logits stay the fused path's.
    HookHandle reading = model->hook_point("blocks.1.attn.hook_pattern")
                             .add([&](const torch::Tensor& p, const std::string&) {
                               ++calls;
                               EXPECT_EQ(p.sizes(), (std::vector<int64_t>{2, 2, 6, 6}));
                               return p;
                             });
    EXPECT_LT(test::max_abs_diff(model->forward(tokens), plain), 1e-5);
    EXPECT_EQ(calls, 1);
  }
  // A replacing hook changes what flows on, as the operator path with the same hook does.
  const auto uniform = [](const torch::Tensor& p, const std::string&) {
    return torch::tril(torch::ones_like(p)) / torch::tril(torch::ones_like(p)).sum(-1, true);
  };
  HookHandle replacing = model->hook_point("blocks.0.attn.hook_pattern").add(uniform);
  const torch::Tensor replaced = model->forward(tokens);
  EXPECT_GT(test::max_abs_diff(replaced, plain), 1e-3);
  ScopedKernelChoice operators(Kernels::kOperators);
  EXPECT_LT(test::max_abs_diff(model->forward(tokens), replaced), 1e-6);
}

TEST(FusedKernels, AHookInsideTheMlpTakesTheExplicitPath) {
  GPT model = test::random_model(test::small_config({"mlp=swiglu"}));
  torch::NoGradGuard no_grad;
  const torch::Tensor plain = model->forward(test::some_tokens());
  HookHandle zero_up =
      model->hook_point("blocks.0.mlp.hook_pre_linear")
          .add([](const torch::Tensor& u, const std::string&) { return torch::zeros_like(u); });
  EXPECT_GT(test::max_abs_diff(model->forward(test::some_tokens()), plain), 1e-3);
}

// ---- PyTorch ----

TEST(FusedKernels, EqualPyTorchInValueAndGradient) {
  // Inputs, our outputs and gradients go to a file; PyTorch recomputes them in float64 from
  // its own operators and autograd and compares.
  test::TempDir dir;
  NamedTensors tensors;
  const auto record = [&](const std::string& name, const Kernel& f, const Inputs& in) {
    const torch::Tensor probe = probe_for(f(in), 21);
    const Evaluated e = evaluate(f, in, probe);
    for (size_t i = 0; i < in.size(); ++i) {
      tensors.emplace_back(name + ".in" + std::to_string(i), in[i]);
      tensors.emplace_back(name + ".grad" + std::to_string(i), e.grads[i]);
    }
    tensors.emplace_back(name + ".probe", probe);
    tensors.emplace_back(name + ".out", e.out);
  };
  record("rms_norm", kRmsFused, random_inputs({{4, 9, 40}, {40}}, torch::kFloat32, 22));
  record("layer_norm", kLayerFused, random_inputs({{4, 9, 40}, {40}, {40}}, torch::kFloat32, 28));
  record("swiglu", kSwigluFused, random_inputs({{4, 9, 2 * 40}}, torch::kFloat32, 23));
  const AttentionShape s{4, 2, 16, true};
  const RopeTables tables = rope_tables(48, s.hs);
  record("attention", attention_fused(s, tables),
         random_inputs({{3, 45, (s.n_head + 2 * s.n_kv) * s.hs}}, torch::kFloat32, 24));
  tensors.emplace_back("attention.cos", tables.cos);
  tensors.emplace_back("attention.sin", tables.sin);
  save_safetensors(dir / "kernels.safetensors", tensors,
                   {{"n_head", std::to_string(s.n_head)}, {"n_kv", std::to_string(s.n_kv)}});
  const test::CommandResult result = test::run_command(
      "/usr/bin/python3 " + (test::source_dir() / "tests/kernels_reference.py").string() + " " +
      (dir / "kernels.safetensors").string() + " 2>&1");
  EXPECT_EQ(result.exit_code, 0) << result.output;
}

}  // namespace
}  // namespace tinylm
