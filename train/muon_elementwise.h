#pragma once
// Muon's passes over a matrix's elements around its Newton-Schulz iteration (train/muon.h), on
// the CPU: one before it (the momentum, Nesterov's blend, the norm and the cast into the
// iteration's layout) and one after it (the weight decay and the update). As LibTorch
// operators they were up to 11 passes and 8 new tensors a matrix, a third of each thread's
// Muon time on the default model (docs/MEASUREMENTS.md, round twelve).

#include <c10/util/BFloat16.h>

#include <cstdint>

namespace tinylm {

// A matrix (rows, cols) of row-major float32 buffers. Its iterate X is (n, m) with n <= m:
// the matrix, or its transpose where rows > cols (X X^T is then the smaller Gram matrix).
struct MuonMatrixShape {
  int64_t rows, cols;
  bool transposed() const { return rows > cols; }
};

// What Newton-Schulz's start adds to |U|_F before dividing by it: a zero gradient stays zero.
// Both starts take it, these passes' and the operators' (train/muon.cpp).
inline constexpr double kMuonNormEpsilon = 1e-7;

// M = mu M + G in place; X = U / (|U|_F + eps) for U = G + mu M, in X's layout, each element
// rounded once to X's type (float or c10::BFloat16).
template <class X>
void muon_start(const float* g, float* m, float mu, MuonMatrixShape shape, X* x);

// W = decay W + step O, O the iterated X read back in the matrix's layout.
template <class X>
void muon_finish(const X* x, float* w, float decay, float step, MuonMatrixShape shape);

// A step's factor on a batch of count n x n matrices A, row-major: C = c A + b I, each element
// rounded once to X's type. The step's polynomial is then P = A C + a I, and X <- P X: products
// with no scales of their own (train/muon.cpp says why).
template <class X>
void quintic_factor(const X* a, X* c, int64_t count, int64_t n, float b_coef, float c_coef);

// m_ii += value on each of a batch of count n x n matrices, each element rounded once.
template <class X>
void add_to_diagonal(X* m, int64_t count, int64_t n, float value);

}  // namespace tinylm
