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
};

RopeTables rope_tables(int64_t block_size, int64_t head_size, double base = 10000.0);

// x: (..., T, hs) at positions 0..T-1 -> the same shape, rotated.
torch::Tensor apply_rope(const torch::Tensor& x, const RopeTables& tables);

}  // namespace tinylm
