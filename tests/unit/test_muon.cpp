// Muon's Newton-Schulz against its scalar map worked out exactly, and its properties; the
// optimizer's split between Muon and AdamW and its state.

#include <gtest/gtest.h>

#include <ATen/Parallel.h>
#include <torch/torch.h>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "small_model.h"
#include "train/adamw.h"
#include "train/muon.h"
#include "train/muon_elementwise.h"

namespace tinylm {
namespace {

// One singular value through the schedule's first `steps` quintics, in double.
double quintic(double s, int steps = kNewtonSchulzSteps) {
  for (int i = 0; i < steps; ++i) s = kNewtonSchulzSchedule[i](s);
  return s;
}

// The largest gain of the first `steps` steps, at the smallest singular values: the product
// of their a.
double largest_gain(int steps) {
  double gain = 1.0;
  for (int i = 0; i < steps; ++i) gain *= kNewtonSchulzSchedule[i].a;
  return gain;
}

// How far a singular value s0 through the schedule computed with unit roundoff `eps` can be
// from the exact map: each step rounds about 4 times (A, the factor c A + b I, P and P X) at the
// size of its terms, |a s| + |b s^3| + |c s^5|, and carries the error so far times its slope.
double map_error_bound(double s0, double eps) {
  double s = s0, error = eps * s0;  // the division by |G|_F
  for (const Quintic& q : kNewtonSchulzSchedule) {
    const double terms =
        std::abs(q.a * s) + std::abs(q.b * s * s * s) + std::abs(q.c * s * s * s * s * s);
    const double slope = std::abs(q.a + 3 * q.b * s * s + 5 * q.c * s * s * s * s);
    error = error * slope + 4 * eps * terms;
    s = q(s);
  }
  return error;
}

TEST(Muon, NewtonSchulzOfADiagonalMatrixIsTheScalarMapOfItsValues) {
  // G = diag(3, 4): |G|_F = 5, so the iteration starts from singular values 0.6 and 0.8.
  const torch::Tensor g = torch::diag(torch::tensor({3.0f, 4.0f}));
  // The iteration divides by |G|_F + kMuonNormEpsilon, and returns float32 (rounded once).
  const double s0 = 3 / (5 + kMuonNormEpsilon), s1 = 4 / (5 + kMuonNormEpsilon);
  for (const auto& [dtype, eps] : {std::pair{torch::kFloat32, std::ldexp(1.0, -24)},
                                   std::pair{torch::kFloat64, std::ldexp(1.0, -53)}}) {
    const torch::Tensor o = newton_schulz(g.to(dtype), dtype);
    for (const auto& [i, start] : {std::pair{0, s0}, std::pair{1, s1}})
      EXPECT_NEAR(o[i][i].item<double>(), quintic(start),
                  map_error_bound(start, eps) + std::ldexp(quintic(start), -24))
          << dtype;
    EXPECT_EQ(o[0][1].item<double>(), 0.0) << dtype;
  }
  // Worked out by hand from the schedule's coefficients, 4 steps each.
  EXPECT_NEAR(quintic(0.6), 1.254792, 1e-6);
  EXPECT_NEAR(quintic(0.8), 1.504233, 1e-6);
}

TEST(Muon, TheScheduleTakesTheUnitIntervalIntoABandAroundOne) {
  // Every singular value in [1e-3, 1] lands in [0.43, 1.57] (scripts/newton-schulz-schedule.py
  // prints the band); a smaller one is lifted by the product of the steps' a.
  double low = 10.0, high = 0.0;
  for (int i = 0; i <= 3000; ++i) {
    const double s = std::pow(10.0, -3.0 + i / 1000.0);
    low = std::min(low, quintic(s)), high = std::max(high, quintic(s));
  }
  EXPECT_GT(low, 0.42);
  EXPECT_LT(high, 1.58);
  EXPECT_NEAR(quintic(1e-5) / 1e-5, largest_gain(kNewtonSchulzSteps),
              1e-3 * largest_gain(kNewtonSchulzSteps));
}

TEST(Muon, NewtonSchulzStaysBoundedForValuesJustAboveOne) {
  // |G|_F bounds every singular value by 1, but rounding to bfloat16 can put one a little
  // above: the schedule's safety factor keeps it in the band, also when every step's input is
  // 1% high. (Designed for [1e-3, 1] exactly, 1.01 grew past 1e20 in 4 steps.)
  for (const double top : {1.0, 1.005, 1.01, 1.02}) {
    EXPECT_GT(quintic(top), 0.42) << top;
    EXPECT_LT(quintic(top), 1.58) << top;
  }
  double s = 1.01;
  for (const Quintic& q : kNewtonSchulzSchedule) s = q(s * 1.01);
  EXPECT_GT(s, 0.42);
  EXPECT_LT(s, 1.58);
  // A nearly rank-one matrix has its top singular value at |G|_F: in bfloat16 (where this CPU
  // iterates in it) rounding moves it around 1 at every step. The schedule designed for
  // [1e-3, 1] exactly took four of these five to 2e4-1.3e8.
  torch::manual_seed(3);
  for (int trial = 0; trial < 5; ++trial) {
    const torch::Tensor g =
        torch::randn({96, 1}).mm(torch::randn({1, 288})) + 1e-3 * torch::randn({96, 288});
    const torch::Tensor o = newton_schulz(g, torch::kBFloat16);
    const double top = torch::linalg_svdvals(o.to(torch::kFloat64))[0].item<double>();
    EXPECT_GT(top, 0.42) << trial;
    EXPECT_LT(top, 1.6) << trial;
  }
}

TEST(Muon, NewtonSchulzRefusesMoreStepsThanTheSchedule) {
  const torch::Tensor g = torch::randn({8, 8});
  EXPECT_THROW(newton_schulz(g, torch::kFloat32, kNewtonSchulzSteps + 1), std::invalid_argument);
  EXPECT_THROW(newton_schulz(g, torch::kFloat32, -1), std::invalid_argument);
  EXPECT_TRUE(torch::equal(newton_schulz(g, torch::kFloat32, 0), g / (g.norm() + 1e-7)));
}

TEST(Muon, NewtonSchulzKeepsSingularVectorsAndPushesValuesTowardOne) {
  // G = U S V^T with values spread over two decades: the result is an odd polynomial of G,
  // so U^T O V is diagonal, with every value near 1.
  torch::manual_seed(5);
  const auto q = [](int64_t n) { return std::get<0>(torch::linalg_qr(torch::randn({n, n}))); };
  const torch::Tensor U = q(48).slice(1, 0, 24), V = q(24);
  const torch::Tensor S = torch::logspace(-2, 0, 24);
  const torch::Tensor g = U.mm(torch::diag(S)).mm(V.t());  // (48, 24): tall
  const torch::Tensor d = U.t().mm(newton_schulz(g, torch::kFloat32)).mm(V);
  const torch::Tensor off = d - torch::diag(torch::diag(d));
  EXPECT_LT(off.abs().max().item<double>(), 1e-4);
  const torch::Tensor values = torch::diag(d);
  // Each value is the scalar map of where it started, S / |S|_F (the smallest ~0.003), within
  // float32's rounding over products 48 long; all of them in the schedule's band.
  const double norm = S.to(torch::kFloat64).norm().item<double>();
  for (int64_t i = 0; i < S.size(0); ++i) {
    const double start = S[i].item<double>() / norm;
    EXPECT_NEAR(values[i].item<double>(), quintic(start),
                map_error_bound(start, 48 * std::ldexp(1.0, -24)))
        << i;
    EXPECT_GT(values[i].item<double>(), 0.42);
    EXPECT_LT(values[i].item<double>(), 1.58);
  }
}

TEST(Muon, NewtonSchulzOfTheTransposeIsTheTranspose) {
  torch::manual_seed(6);
  const torch::Tensor g = torch::randn({20, 36});
  EXPECT_LT(test::max_abs_diff(newton_schulz(g.t(), torch::kFloat32),
                               newton_schulz(g, torch::kFloat32).t()),
            1e-5);
}

// Both kinds of path a CPU may take, forced here: oneDNN's bfloat16 matmul (AVX-512; called
// directly where the build has libdnnl-dev, through LibTorch otherwise), and LibTorch's own,
// which AVX2-only CPUs get (oneDNN disabled stands in for them).
TEST(Muon, Bfloat16NewtonSchulzIsCloseToFloat32OnEveryKernelPath) {
  torch::manual_seed(7);
  const torch::Tensor g = torch::randn({32, 64});
  const torch::Tensor a = newton_schulz(g, torch::kFloat32);
  const auto relative_error = [&](const torch::Tensor& b) {
    return ((a - b).norm() / a.norm()).item<double>();
  };
  // With float32 sums, a step rounds to bfloat16 (unit roundoff 2^-8, relative) 5 times: its
  // 3 products (X X^T, A's factor times A, P X), the factor c A + b I and P's diagonal plus a.
  const double bound = 5 * kNewtonSchulzSteps * std::ldexp(1.0, -8);
  const torch::Tensor b = newton_schulz(g, torch::kBFloat16);
  EXPECT_EQ(b.scalar_type(), torch::kFloat32);
  EXPECT_LT(relative_error(b), bound);
  // A 16-wide matrix's A A (16^3 multiply-adds) is too small for LibTorch to hand to oneDNN.
  const torch::Tensor narrow = torch::randn({16, 64});
  const torch::Tensor narrow_a = newton_schulz(narrow, torch::kFloat32);
  EXPECT_LT(((newton_schulz(narrow, torch::kBFloat16) - narrow_a).norm() / narrow_a.norm())
                .item<double>(),
            bound);
  // LibTorch's own GEMM sums in bfloat16 (0.21 here): the iteration must not run in it, but
  // in float32, as float32 runs without oneDNN.
  at::globalContext().setUserEnabledMkldnn(false);
  EXPECT_FALSE(bfloat16_products_sum_in_float32());
  const torch::Tensor fallback = newton_schulz(g, torch::kBFloat16);
  const torch::Tensor fallback_float32 = newton_schulz(g, torch::kFloat32);
  at::globalContext().setUserEnabledMkldnn(true);
  EXPECT_TRUE(torch::equal(fallback, fallback_float32)) << relative_error(fallback);
}

double relative_error(const torch::Tensor& x, const torch::Tensor& y) {
  return ((x - y).norm() / y.norm()).item<double>();
}

// A matrix iterated in a batch and alone may sum in another order: per product a relative
// difference of at most (reduction length) x (unit roundoff), 3 products a step. A float32
// matrix may go through its Gram matrix (newton_schulz_through_gram: on a thread of its own,
// or wherever float32 runs on oneDNN), where the difference in Q_k reaches the result
// multiplied by Q's norm, at most the product of the steps' a (largest_gain).
// bfloat16's products round their result once each (the bound of
// Bfloat16NewtonSchulzIsCloseToFloat32OnEveryKernelPath).
double float32_bound(int64_t rows, int64_t cols, int steps, bool own_thread) {
  const double gain =
      newton_schulz_through_gram(rows, cols, steps, own_thread) ? largest_gain(steps) : 1;
  return gain * 3 * steps * std::max(rows, cols) * std::ldexp(1.0, -24);
}

// Runs f() with LibTorch's oneDNN turned on and off: float32's two CPU paths, oneDNN's API
// (where its float32 kernels are AVX-512's) and BLAS, which AVX2-only CPUs take.
template <class F>
void with_and_without_onednn(const F& f) {
  for (const bool onednn : {true, false}) {
    at::globalContext().setUserEnabledMkldnn(onednn);
    f(onednn);
  }
  at::globalContext().setUserEnabledMkldnn(true);
}

// Q's norm for one matrix g: the largest factor the steps multiply a singular value s of
// g / |g|_F by, quintic(s) / s (at least 1). float32_bound takes the largest any matrix
// could have, largest_gain; a given matrix's is far smaller unless it is close to singular.
double gram_gain(const torch::Tensor& g, int steps) {
  const torch::Tensor x = g.to(torch::kFloat64);
  const torch::Tensor values = torch::linalg_svdvals(x / x.norm());
  double gain = 1.0;
  for (int64_t i = 0; i < values.size(0); ++i) {
    const double s = values[i].item<double>();
    if (s > 0) gain = std::max(gain, quintic(s, steps) / s);
  }
  return gain;
}

// The step a float32 weight took against Muon's formula: taken = (d W_before - W) / s (in
// float64) against the reference iteration's O(U), relatively. The optimizer iterates each
// matrix on a thread of its own and the reference a matrix alone, which on a CPU whose float32
// products are BLAS's may be two routes (directly, or through the Gram matrix:
// newton_schulz_through_gram); each is within its float32 bound of the exact result (with the
// matrix's own Q norm, gram_gain, for the Gram route), so the two are within the sum. The
// optimizer's update rounds the weight twice (d W, then + s O: 2^-24 of |W| each).
void expect_float32_step(const torch::Tensor& before, double d, const torch::Tensor& w, double s,
                         const torch::Tensor& u, const torch::Tensor& expected,
                         const std::string& what) {
  const torch::Tensor taken = (d * before.to(torch::kFloat64) - w.to(torch::kFloat64)) / s;
  const double unit =
      3.0 * kNewtonSchulzSteps * std::max(u.size(0), u.size(1)) * std::ldexp(1.0, -24);
  const double routes = (1.0 + gram_gain(u, kNewtonSchulzSteps)) * unit;
  const double rounding =
      2 * std::ldexp(1.0, -24) * w.norm().item<double>() / (s * expected.norm().item<double>());
  EXPECT_LT(relative_error(taken, expected.to(torch::kFloat64)), routes + rounding) << what;
}

// Float32 against float64 (the same steps through LibTorch's products), matrices on threads of
// their own and alone, directly (24 x 24) and through the Gram matrix (16 x 64, and 64 x 16 as
// its transpose) on each CPU path. The float64
// iteration is exact enough to be the reference; float32's rounding differs from it within
// float32_bound, with each matrix's own Q norm (gram_gain) in place of largest_gain.
TEST(Muon, Float32NewtonSchulzIsCloseToFloat64OnEveryPath) {
  ASSERT_FALSE(newton_schulz_through_gram(24, 24, kNewtonSchulzSteps, true));
  ASSERT_TRUE(newton_schulz_through_gram(16, 64, kNewtonSchulzSteps, true));
  const int threads = at::get_num_threads();
  with_and_without_onednn([&](bool onednn) {
    for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{24, 24}, {16, 64}, {64, 16}}) {
      torch::manual_seed(11);
      const torch::Tensor g = torch::randn({2, rows, cols});
      const torch::Tensor reference = newton_schulz(g.to(torch::kFloat64), torch::kFloat64);
      // 2 matrices on 1 or 2 threads: each on a thread of its own (one after the other on 1).
      for (const int t : {1, 2}) {
        at::set_num_threads(t);
        const torch::Tensor o = newton_schulz(g, torch::kFloat32);
        const bool gram = newton_schulz_through_gram(rows, cols, kNewtonSchulzSteps, true);
        const bool alone_gram = newton_schulz_through_gram(rows, cols, kNewtonSchulzSteps, false);
        // A copy: C++17 lambdas cannot capture structured bindings (clang refuses).
        const int64_t longest = std::max(rows, cols);
        for (int64_t i = 0; i < 2; ++i) {
          const auto bound = [&](bool through_gram) {
            const double gain = through_gram ? gram_gain(g[i], kNewtonSchulzSteps) : 1.0;
            return gain * 3 * kNewtonSchulzSteps * longest * std::ldexp(1.0, -24);
          };
          EXPECT_LT(relative_error(o[i], reference[i]), bound(gram))
              << rows << "x" << cols << ", oneDNN " << onednn << ", " << t << " threads";
          EXPECT_LT(relative_error(newton_schulz(g[i], torch::kFloat32), reference[i]),
                    bound(alone_gram))
              << rows << "x" << cols << " alone, oneDNN " << onednn << ", " << t << " threads";
        }
      }
    }
  });
  at::set_num_threads(threads);
}
const double bfloat16_bound = 5 * kNewtonSchulzSteps * std::ldexp(1.0, -8);

TEST(Muon, NewtonSchulzOfABatchIsEachMatrixAlone) {
  // Scales 3e4 apart: a norm over the whole batch instead of each matrix's would leave the
  // small one's singular values far below the basin, and its result far from orthogonal.
  // Two shapes, for both float32 iterations of a matrix on its own thread: (30, 24) steps
  // X directly, (16, 64) runs through its Gram matrix.
  ASSERT_FALSE(newton_schulz_through_gram(30, 24, kNewtonSchulzSteps, true));
  ASSERT_TRUE(newton_schulz_through_gram(16, 64, kNewtonSchulzSteps, true));
  const torch::Tensor scales = torch::tensor({1.0f, 1e-3f, 30.0f}).view({3, 1, 1});
  // Both ways of the threads: 2 threads take a matrix each (3 >= 2; float32 there by BLAS,
  // whose result lands in the spare buffer after an odd number of direct steps, or by oneDNN),
  // 4 split each batched product.
  const int threads = at::get_num_threads();
  with_and_without_onednn([&](bool onednn) {
    for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{30, 24}, {16, 64}}) {
      torch::manual_seed(9);
      const torch::Tensor g = torch::randn({3, rows, cols}) * scales;
      for (const int t : {2, 4}) {
        at::set_num_threads(t);
        for (const int steps : {kNewtonSchulzSteps, kNewtonSchulzSteps - 1}) {
          // 4 threads split each batched product: BLAS's Gram path is the single thread's.
          const bool own_thread = t == 2;
          for (const auto& [dtype, bound] :
               {std::pair{torch::kFloat32, float32_bound(rows, cols, steps, own_thread)},
                std::pair{torch::kBFloat16, bfloat16_bound}}) {
            const torch::Tensor batch = newton_schulz(g, dtype, steps);
            ASSERT_EQ(batch.sizes(), g.sizes());
            EXPECT_EQ(batch.scalar_type(), torch::kFloat32);
            for (int64_t i = 0; i < g.size(0); ++i)
              EXPECT_LT(relative_error(batch[i], newton_schulz(g[i], dtype, steps)), bound)
                  << rows << "x" << cols << " " << dtype << " " << i << ", " << t << " threads, "
                  << steps << " steps, oneDNN " << onednn;
          }
        }
      }
    }
  });
  at::set_num_threads(threads);
}

TEST(Muon, NewtonSchulzOfSeveralBatchesIsEachMatrixAlone) {
  // Batches of four shapes and three counts (9 matrices), dealt together over 2 and 3
  // threads: each matrix's result is its own, whichever thread took it and whatever else that
  // thread took, each batch back in its caller's orientation (64 x 16 is iterated as 16 x 64).
  torch::manual_seed(10);
  const std::vector<torch::Tensor> batches{
      torch::randn({3, 40, 24}), torch::randn({3, 16, 64}) * 30.0, torch::randn({1, 24, 24}),
      torch::randn({2, 64, 16}) * 1e-3};
  const int threads = at::get_num_threads();
  with_and_without_onednn([&](bool onednn) {
    for (const int t : {2, 3}) {
      at::set_num_threads(t);
      for (const auto dtype : {torch::kFloat32, torch::kBFloat16}) {
        const std::vector<torch::Tensor> out = newton_schulz(batches, dtype);
        ASSERT_EQ(out.size(), batches.size());
        for (size_t b = 0; b < batches.size(); ++b) {
          ASSERT_EQ(out[b].sizes(), batches[b].sizes());
          const int64_t rows = batches[b].size(1), cols = batches[b].size(2);
          const double bound = dtype == torch::kFloat32
                                   ? float32_bound(rows, cols, kNewtonSchulzSteps, true)
                                   : bfloat16_bound;
          for (int64_t i = 0; i < batches[b].size(0); ++i)
            EXPECT_LT(relative_error(out[b][i], newton_schulz(batches[b][i], dtype)), bound)
                << "batch " << b << " matrix " << i << ", " << dtype << ", " << t
                << " threads, oneDNN " << onednn;
        }
      }
    }
  });
  at::set_num_threads(threads);
}

TEST(Muon, TakesTheBlocksMatricesAndLeavesTheRestToAdamW) {
  GPT model = test::random_model(test::small_config({"tie_weights=false"}));
  TrainConfig t;
  t.optimizer = OptimizerKind::kMuon;
  AdamW optimizer(model, t);
  EXPECT_EQ(optimizer.muon_matrices(), 2 * 4);  // c_attn, c_proj, c_fc, mlp.c_proj per block
  std::set<std::string> names;
  for (const auto& [name, tensor] : optimizer.moments()) names.insert(name);
  EXPECT_TRUE(names.count("muon_momentum.transformer.h.0.attn.c_attn.weight"));
  EXPECT_FALSE(names.count("exp_avg.transformer.h.0.attn.c_attn.weight"));
  for (const char* adam : {"transformer.wte.weight", "lm_head.weight",
                           "transformer.h.0.ln_1.weight", "transformer.h.0.attn.c_attn.bias"}) {
    EXPECT_TRUE(names.count(std::string("exp_avg.") + adam)) << adam;
    EXPECT_FALSE(names.count(std::string("muon_momentum.") + adam)) << adam;
  }
}

// Worked: a 288 x 96 matrix (c_attn at n_embd 96) has n = 96, m = 288, so a step is
// 4 n^2 m + 2 n^3 = 10,616,832 + 1,769,472 = 12,386,304 FLOPs, either way round.
TEST(Muon, NewtonSchulzFlopsOfAWorkedExample) {
  EXPECT_EQ(newton_schulz_flops(288, 96, 1), 12386304.0);
  EXPECT_EQ(newton_schulz_flops(96, 288, 1), 12386304.0);
  EXPECT_EQ(newton_schulz_flops(288, 96), kNewtonSchulzSteps * 12386304.0);
}

// The default recipe's 12 matrices per step: per layer 288 x 96 (12,386,304 a step), 96 x 96
// (5,308,416), 512 x 96 (20,643,840) and 96 x 256 (11,206,656), 49,545,216 FLOPs; 4 steps,
// 3 layers: 594,542,592, the 0.59 GFLOP docs/MEASUREMENTS.md quotes.
TEST(Muon, TheOptimizerCountsItsNewtonSchulzFlops) {
  GPT model = test::random_model(test::small_config(
      {"n_layer=3", "n_head=4", "n_embd=96", "mlp=swiglu", "tie_weights=false"}));
  TrainConfig t;
  t.optimizer = OptimizerKind::kMuon;
  EXPECT_EQ(AdamW(model, t).newton_schulz_flops(), 594542592.0);
  t.optimizer = OptimizerKind::kAdamW;
  EXPECT_EQ(AdamW(model, t).newton_schulz_flops(), 0.0);
}

TEST(Muon, AStepMovesEachMatrixByItsOrthogonalisedMomentum) {
  // The first step from zero momentum: M = G, U = G + mu G, W -= lr sqrt(max(1, r / c)) O(U),
  // for every matrix, each by its own gradient (the optimizer batches them by shape).
  GPT model = test::random_model(test::small_config());
  TrainConfig t;
  t.optimizer = OptimizerKind::kMuon;
  t.weight_decay = 0.0;
  t.muon_momentum = 0.9;
  t.muon_learning_rate = 0.05;
  t.learning_rate = 1e-3;
  AdamW optimizer(model, t);
  std::vector<std::string> names;
  std::map<std::string, torch::Tensor> before, grads;
  torch::manual_seed(8);
  for (const auto& item : model->named_parameters()) {
    const std::string& name = item.key();
    const torch::Tensor& w = item.value();
    if (w.dim() != 2 || name.rfind("transformer.h.", 0) != 0) continue;
    names.push_back(name);
    before[name] = w.detach().clone();
    grads[name] = torch::randn(w.sizes()) * static_cast<double>(names.size());
    torch::NoGradGuard no_grad;
    w.mutable_grad().copy_(grads[name]);
  }
  ASSERT_EQ(static_cast<int64_t>(names.size()), optimizer.muon_matrices());
  optimizer.step(t.learning_rate);  // the scheduled AdamW rate; Muon's is 50 times it
  for (const std::string& name : names) {
    const torch::Tensor w = model->named_parameters()[name];
    const double scale =
        std::sqrt(std::max(1.0, static_cast<double>(w.size(0)) / static_cast<double>(w.size(1))));
    const torch::Tensor u = grads[name] * 1.9;
    expect_float32_step(before[name], 1.0, w.detach(), 0.05 * scale, u,
                        newton_schulz(u, torch::kFloat32), name);
  }
}

// Two steps from zero momentum with weight decay, against Muon's formula written out with the
// reference Newton-Schulz: M_1 = G_1, W_1 = d W_0 - s O(G_1 + mu M_1); M_2 = mu M_1 + G_2,
// W_2 = d W_1 - s O(G_2 + mu M_2), d = 1 - lr wd, s = lr_muon sqrt(max(1, rows / cols)).
// n_embd 32 with SwiGLU: tall (c_attn, the gate-and-up), square and wide matrices, each
// side 32, past the width that Newton-Schulz keeps in float32, so that a bfloat16 run iterates
// in bfloat16 where the CPU's products sum in float32. In float32 the weights are compared;
// in bfloat16 each step's O, read back from them, to the iteration's bound
// (Bfloat16NewtonSchulzIsCloseToFloat32OnEveryKernelPath) plus one rounding of its start.
void expect_two_steps_follow_the_formula(Dtype dtype) {
  GPT model = test::random_model(test::small_config({"n_embd=32", "mlp=swiglu"}));
  TrainConfig t;
  t.optimizer = OptimizerKind::kMuon;
  t.dtype = dtype;
  t.weight_decay = 1.0;  // d = 0.999: a step without it is off by far more than the bound
  t.muon_momentum = 0.9;
  t.muon_learning_rate = 0.05;
  t.learning_rate = 1e-3;
  AdamW optimizer(model, t);
  const double decay = 1.0 - t.learning_rate * t.weight_decay;
  std::vector<std::string> names;
  for (const auto& item : model->named_parameters())
    if (item.value().dim() == 2 && item.key().rfind("transformer.h.", 0) == 0)
      names.push_back(item.key());
  ASSERT_EQ(static_cast<int64_t>(names.size()), optimizer.muon_matrices());
  std::map<std::string, torch::Tensor> momentum;
  torch::manual_seed(9);
  for (int step = 0; step < 2; ++step) {
    std::map<std::string, torch::Tensor> before, grads;
    for (size_t i = 0; i < names.size(); ++i) {
      const torch::Tensor w = model->named_parameters()[names[i]];
      before[names[i]] = w.detach().clone();
      grads[names[i]] = torch::randn(w.sizes()) * static_cast<double>(i + 1);
      torch::NoGradGuard no_grad;
      w.mutable_grad().copy_(grads[names[i]]);
    }
    optimizer.step(t.learning_rate);
    for (const std::string& name : names) {
      const torch::Tensor w = model->named_parameters()[name].detach();
      const torch::Tensor& g = grads[name];
      momentum[name] = step == 0 ? g.clone() : 0.9 * momentum[name] + g;
      const torch::Tensor u = g + 0.9 * momentum[name];
      const torch::Tensor expected = newton_schulz(u, torch::kFloat32);
      const double scale =
          0.05 *
          std::sqrt(std::max(1.0, static_cast<double>(w.size(0)) / static_cast<double>(w.size(1))));
      if (dtype == Dtype::kFloat32) {
        expect_float32_step(before[name], decay, w, scale, u, expected,
                            name + " at step " + std::to_string(step));
        continue;
      }
      const torch::Tensor taken = (decay * before[name] - w) / scale;  // the step's O
      EXPECT_LT(relative_error(taken, expected), bfloat16_bound + std::ldexp(1.0, -8))
          << name << " at step " << step;
    }
  }
}

TEST(Muon, TwoStepsFollowTheFormulaInFloat32) {
  expect_two_steps_follow_the_formula(Dtype::kFloat32);
}

TEST(Muon, TwoStepsFollowTheFormulaInBfloat16) {
  expect_two_steps_follow_the_formula(Dtype::kBfloat16);
}

}  // namespace
}  // namespace tinylm
