#pragma once
// Causal self-attention from c_attn's output to c_proj's input in one kernel forward and one
// backward (model/attention.h has the formula), for training and whole-window evaluation:
//   rotate q and k (rotary positions, when given), then per (batch, kv head), for each of
//   its query heads: S = Q K^T / sqrt(hs) on rows j <= i, P = softmax_row(S), O = P V,
//   written straight into (B, T, C) for c_proj.
// One (T, T) tile per head at a time, in cache. It reads q, k and v where c_attn put them
// and writes their gradients into one (B, T, C + 2 n_kv hs) tensor: no split, no transposes,
// no join of the three gradients, no rotary operators. The backward:
//   dV = P^T dO,  dP = dO V^T,  dS = P (dP - rowsum(P dP)) / sqrt(hs),
//   dQ = dS K,  dK = dS^T Q,  then dq and dk rotated back.
// The pattern P is kept for the backward (B nh T T floats), never the scores.

#include <cstdint>

#include <ATen/ATen.h>

namespace tinylm {

// qkv (B, T, C + 2 n_kv hs) float32, float64 or bfloat16 on the CPU, q, k, v stacked as c_attn
// makes them; cos and sin (>= T, hs / 2), the angles of positions 0 .., or undefined for no
// rotation -> y (B, T, C) in qkv's type, head h in columns h hs .. (h + 1) hs. bfloat16 (c_attn's
// output under autocast) is computed in float32, read and written by the kernel itself: y and
// the gradient are the float32 kernel's rounded once (c_proj would cast y to bfloat16 anyway).
at::Tensor fused_causal_attention(const at::Tensor& qkv, int64_t n_head, int64_t n_kv_head,
                                  const at::Tensor& cos, const at::Tensor& sin);

}  // namespace tinylm
