#pragma once
// Rotary position embedding (RoFormer): q and k of every head are rotated by an angle that
// grows with the position, pos * theta_i with theta_i = 10000^(-2i/hs), on the pairs
// (x_i, x_{i + hs/2}) (the half-split layout of GPT-NeoX and LLaMA). A rotation keeps norms,
// and q_i . k_j then depends on the positions only through i - j. Nothing is added to the
// residual stream.

#include <cstdint>

#include <torch/torch.h>

namespace tinylm {

struct RopeTables {
  torch::Tensor cos;  // (block_size, hs / 2)
  torch::Tensor sin;  // (block_size, hs / 2)
  // The same, laid out for rotating a whole head in two products:
  // rope(x) = x * cos_full + roll(x, hs/2) * sin_signed, cos_full = [cos, cos],
  // sin_signed = [-sin, sin] (T, hs): four operators where slicing and joining the halves
  // takes nine, forward and backward; the same numbers to the bit.
  torch::Tensor cos_full;
  torch::Tensor sin_signed;
};

// cos and sin (hs / 2 each) of one position's angles, computed in double: exact to float
// rounding at any position. The one definition of the angles; the tables are made of it.
void rope_row(int64_t position, int64_t head_size, float* cos, float* sin);

// The angles of positions first .. first + count - 1.
RopeTables rope_tables(int64_t count, int64_t head_size, int64_t first = 0);

// x: (..., T, hs) at positions first .. first + T - 1 -> the same shape, rotated. `tables`
// holds positions from 0; positions past its end (a KV cache sliding beyond block_size) are
// computed on the spot.
torch::Tensor apply_rope(const torch::Tensor& x, const RopeTables& tables, int64_t first = 0);

}  // namespace tinylm
