#pragma once
// The largest of a row's n elements, taken lane by lane across one AVX-512 register's worth
// of lanes, then across the lanes. GCC keeps the lanes in a register; the max as an omp simd
// reduction over a row's variable length it ran as a scalar loop (vmaxss), a third of the
// loss kernel's forward and as much of the softmax's time.

#include <algorithm>
#include <cstdint>

namespace tinylm {

template <class T>
constexpr int64_t kLanes = 64 / sizeof(T);  // one AVX-512 register

// n >= 1. Inlined into each caller's per-instruction-set clone.
template <class T>
inline T row_max(const T* row, int64_t n) {
  T lanes[kLanes<T>];
  for (int64_t k = 0; k < kLanes<T>; ++k) lanes[k] = row[0];
  int64_t j = 0;
  for (; j + kLanes<T> <= n; j += kLanes<T>)
    for (int64_t k = 0; k < kLanes<T>; ++k) lanes[k] = std::max(lanes[k], row[j + k]);
  for (; j < n; ++j) lanes[0] = std::max(lanes[0], row[j]);
  T max = lanes[0];
  for (int64_t k = 1; k < kLanes<T>; ++k) max = std::max(max, lanes[k]);
  return max;
}

}  // namespace tinylm
