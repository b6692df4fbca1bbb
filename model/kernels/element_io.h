#pragma once
// How a fused kernel reads and writes one element of its storage type: float32 and float64
// as they are; bfloat16 (autocast's activations) widened to float32 on the way in and rounded
// to nearest-even on the way out, NaN to 0x7fc0: the rounding LibTorch's own casts do, so a
// kernel that reads and writes bfloat16 itself returns what casting its input to float32 and
// its float32 result back returns (to the bit, but where its float32 arithmetic differs in
// the last bit across a rounding boundary), without the two copies each way. Plain integer
// arithmetic, which GCC vectorises (c10's conversion tests for NaN with std::isnan, which
// -ffast-math, these kernels' flag, would remove).

#include <c10/util/BFloat16.h>

#include <cstdint>
#include <cstring>

namespace tinylm {

inline float widen(float x) { return x; }
inline double widen(double x) { return x; }
inline float widen(c10::BFloat16 x) {
  const uint32_t bits = static_cast<uint32_t>(x.x) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// The type a kernel computes an element of storage type T in.
template <class T>
using Widened = decltype(widen(T{}));

inline void store(float& out, float v) { out = v; }
inline void store(double& out, double v) { out = v; }
inline void store(c10::BFloat16& out, float v) {
  uint32_t u;
  std::memcpy(&u, &v, sizeof u);
  const bool nan = (u & 0x7fffffffu) > 0x7f800000u;
  out.x = nan ? uint16_t{0x7fc0} : static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// Spans widened and stored: a kernel that reads bfloat16 widens a chunk of it into a float32
// buffer, computes there, and stores the chunk back.
inline constexpr int64_t kWidenedChunk = 128;

template <class T>
inline void widen_span(const T* in, Widened<T>* out, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) out[i] = widen(in[i]);
}

template <class T>
inline void store_span(const Widened<T>* in, T* out, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) store(out[i], in[i]);
}

}  // namespace tinylm
