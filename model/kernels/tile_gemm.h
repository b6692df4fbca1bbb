#pragma once
// The products inside causal attention's (T, T) tiles, in registers: C (m, n) = alpha A B +
// beta C for m, n, k of a head's width and a sequence's length (24 x 64 x 32 in the default
// recipe). OpenBLAS's sgemm packs both operands and checks its threads on every call, which
// at these sizes costs more than the multiply-adds: attention's 860 calls a thread a step
// were 9.7% of a training run's samples, these products 5.1% (docs/MEASUREMENTS.md, round
// ten). Here a block of C's rows stays in registers while k runs, reading A one element at a
// time and B a row at a time, as they lie.

#include <cstdint>
#include <optional>

#include "model/kernels/vector_isa.h"

namespace tinylm {

// A (m, k) is read at a[i * a_row + p * a_col]: (lda, 1) for A as stored, (1, lda) for the
// transpose of a stored (k, m). B (k, n) is row-major with row stride ldb, C (m, n) with ldc.
// beta == 0 writes C without reading it. float32 and float64 (for finite-difference checks).
// `isa`: the build to use (one the CPU runs); by default the widest.
template <class T>
void tile_gemm(int m, int n, int k, T alpha, const T* a, int64_t a_row, int64_t a_col, const T* b,
               int64_t ldb, T beta, T* c, int64_t ldc, std::optional<VectorIsa> isa = std::nullopt);

// B^T of a row-major (rows, cols) B with row stride ld into `out` (cols, rows), contiguous:
// the layout tile_gemm reads for a product with B transposed (Q K^T, dO V^T).
template <class T>
void transpose_into(const T* b, int64_t ld, int rows, int cols, T* out);

}  // namespace tinylm
