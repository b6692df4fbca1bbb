#pragma once
// Muon (Keller Jordan, 2024), the optimizer of modded-nanogpt's speedrun records and of
// nanochat, for the blocks' 2-D weight matrices; AdamW keeps the embeddings, the norms, the
// biases and an untied lm_head (train/adamw.h runs both). Per matrix W (rows, cols), grad G:
//   M = mu M + G                      momentum
//   U = G + mu M                      Nesterov
//   O = NewtonSchulz(U)               ~ the orthogonal factor of U: its singular values to ~1
//   W -= lr sqrt(max(1, rows / cols)) O
// Newton-Schulz runs 4 steps of a quintic X <- a X + (b A + c A^2) X, A = X X^T, from
// X = U / |U|_F, each step with coefficients of its own (kNewtonSchulzSchedule): it pushes every
// singular value of X from [1e-3, 1] into [0.43, 1.57] without an SVD. Keller Jordan's
// iteration ran one quintic, (3.4445, -4.7750, 2.0315), 5 times; these 4 steps reach the same
// validation loss on four corpora for a fifth less of the optimizer's multiply-adds
// (docs/MEASUREMENTS.md, round eighteen).

#include <array>
#include <vector>

#include <torch/torch.h>

namespace tinylm {

// One step's odd quintic p(s) = a s + b s^3 + c s^5 of each singular value s.
struct Quintic {
  double a, b, c;
  double operator()(double s) const { return a * s + b * s * s * s + c * s * s * s * s * s; }
};

// The steps, Polar Express's greedy construction (Amsel, Persson, Musco and Gower, 2025):
// step k is the odd quintic closest to 1 in the worst case (minimax, by Remez exchange) on the
// interval [l_k, u_k s] the singular values can be in, starting from [1e-3, 1]; the next
// interval is that quintic's image. The safety factor s = 1.02 designs each step for values 2%
// above where they should be, as rounding puts some: without it a value of 1.01 grew past 1e20
// in 4 steps, and in bfloat16 a nearly rank-one matrix (its top value at |G|_F = 1) came out
// with singular values of 1e4-1e8; with it, 1.01 with 1% too much at every step ends at 0.92.
// scripts/newton-schulz-schedule.py derives the numbers.
inline constexpr std::array<Quintic, 4> kNewtonSchulzSchedule{{
    {8.3051, -23.6631, 16.8756},
    {4.1039, -2.9320, 0.5263},
    {3.9008, -2.7969, 0.5119},
    {3.2783, -2.3690, 0.4666},
}};
inline constexpr int kNewtonSchulzSteps = static_cast<int>(kNewtonSchulzSchedule.size());

// Whether a bfloat16 matmul on this CPU keeps its running sums in float32. LibTorch 1.13
// hands one to oneDNN where the CPU has AVX-512 BW, VL and DQ and oneDNN is enabled; its own
// GEMM elsewhere (AVX2-only CPUs) rounds the sum to bfloat16 at every term, which put
// Newton-Schulz 0.21 (relative, Frobenius) from float32 where oneDNN's is 0.016
// (docs/MEASUREMENTS.md).
bool bfloat16_products_sum_in_float32();

// The approximate orthogonal factor of g (rows, cols), or of each matrix of a batch g
// (count, rows, cols), computed in `dtype` (bfloat16 where the matmuls are fast in it),
// returned in float32. A bfloat16 iteration on a CPU whose bfloat16 matmul would sum in
// bfloat16 (bfloat16_products_sum_in_float32), or of a matrix at most 16 wide (whose
// products LibTorch keeps from oneDNN), runs in float32 instead. A batch runs each
// product as one batched matmul, on the CPU a matrix per thread where the batch has at
// least as many matrices as there are threads: at this project's sizes (96- to 128-wide
// Gram matrices) a matmul call costs more in overhead than in arithmetic, and one batched
// bfloat16 call ran 4.5x the rate of the same products called one by one
// (docs/MEASUREMENTS.md). Float32 goes through oneDNN too where its float32 kernels are
// AVX-512's: 0.58-0.59 of the time BLAS took at the default model's shapes. Elsewhere a float32
// matrix on its own thread takes its two symmetric products (X X^T and A A) as BLAS syrk,
// which does half of gemm's multiply-adds (the float32 optimizer step fell from 16-18 to
// 13-14 ms). Either way a wide float32 matrix may iterate on its n x n Gram matrix instead
// (newton_schulz_through_gram).
// `steps`: the schedule's first that many (0 to kNewtonSchulzSteps; std::invalid_argument
// otherwise).
torch::Tensor newton_schulz(const torch::Tensor& g, torch::ScalarType dtype,
                            int steps = kNewtonSchulzSteps);
// The same for several batches at once (each (count, rows, cols), shapes free to differ), as
// each alone would return it. On the CPU the matrices of every batch are dealt to the
// threads together, longest first to the least loaded, so that batches of a few matrices
// each do not leave a thread idle while another finishes its batch's odd one, and a thread
// done with its share takes the slower ones' shares not yet begun (train/work_lists.h).
// Float32 and bfloat16 are dealt apart; a thread's bfloat16 matrices of one batch stay one
// batched call (oneDNN's call overhead is the larger cost there).
std::vector<torch::Tensor> newton_schulz(const std::vector<torch::Tensor>& batches,
                                         torch::ScalarType dtype, int steps = kNewtonSchulzSteps);

// Whether a float32 matrix (rows, cols) runs `steps` Newton-Schulz steps through its Gram
// matrix on this CPU now: with n <= m its sides, X_k = Q_k X0 where Q_k is a polynomial in
// G = X0 X0^T, so the steps can run on n x n matrices and touch X0 twice (G and Q X0)
// instead of twice a step. Where float32 goes through oneDNN, wherever that is fewer
// multiply-adds (m > 3n/2 at 4 steps); through BLAS, only on a thread of its own (`own_thread`),
// where syrk makes it fewer past m > 5n/3: at 4 steps 51% of the direct steps' for a SwiGLU
// gate-and-up matrix (n_embd x 16/3 n_embd), 70% for c_attn.
bool newton_schulz_through_gram(int64_t rows, int64_t cols, int steps, bool own_thread);

// The FLOPs of `steps` direct Newton-Schulz steps on a (rows, cols) matrix, two per
// multiply-add: with n <= m its sides, each step's A = X X^T (n x m x n), A A (n^3) and B X
// (n x n x m), steps (4 n^2 m + 2 n^3). Nominal: the Gram route and syrk do fewer, so a rate
// from it is the rate the direct iteration would have needed. `bench` counts it beside the
// model's FLOPs.
double newton_schulz_flops(int64_t rows, int64_t cols, int steps = kNewtonSchulzSteps);

// One batch of same-shaped matrices (count, rows, cols) or one matrix (rows, cols) for Muon.
struct MuonMatrices {
  torch::Tensor param, grad, momentum;
};

// One Muon step on each batch: momentum updated in place, param decayed (times `decay`, 1 - lr
// weight_decay) and the update subtracted. The batches' Newton-Schulz iterations run together
// (newton_schulz of several batches), and on the CPU each thread also blends the momentum of
// the matrices it iterates and applies their update: done before and after the iteration on
// the whole batches, those small operators left the other threads idle for a quarter of the
// optimizer's time. On the CPU in float32 each side is one pass (train/muon_elementwise.h).
void muon_update(const std::vector<MuonMatrices>& batches, double lr, double mu, double decay,
                 torch::ScalarType dtype);

}  // namespace tinylm
