#pragma once
// What the fused kernels share: how rows are split over threads, and the per-instruction-set
// clones of their loops.

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdint>

// The compiler builds each marked loop for AVX-512, AVX2 and plain x86-64, and the loader
// picks the one this CPU runs (GCC's function multi-versioning): one binary, every machine.
// AVX-512 is x86-64-v4's (F, BW, DQ, VL, CD: every AVX-512 CPU but Xeon Phi), not F alone:
// without BW, GCC widened bfloat16 chunks 256 bits at a time into buffers that the arithmetic
// then read 512 bits at a time, and each such load waited for two stores to reach the cache
// (a failed store-to-load forward): 28% of the SwiGLU backward's samples sat on one of them,
// which took 12% longer than with v4, and the bfloat16 step 1-3% (docs/MEASUREMENTS.md).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TINYLM_CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))
#else
#define TINYLM_CPU_CLONES
#endif

namespace tinylm {

// Rows per task of at::parallel_for: enough work to outweigh handing it to a thread.
inline constexpr int64_t kRowGrain = 16;

// N rows cut into a fixed number of contiguous chunks, one per thread at most. For sums over
// rows: each chunk adds into its own partial, and the partials are added in chunk order, so
// the result is the same whichever thread ran which chunk. Inside a parallel region (a thread
// replica's, train/thread_replicas.h) the loop runs on one thread, so there is one chunk, as
// with one thread: the sum is then the same as that thread alone would make.
struct RowChunks {
  explicit RowChunks(int64_t rows)
      : rows(rows),
        count(std::max<int64_t>(
            1, std::min<int64_t>(at::in_parallel_region() ? 1 : at::get_num_threads(),
                                 (rows + kRowGrain - 1) / kRowGrain))) {}
  int64_t begin(int64_t i) const { return rows * i / count; }
  int64_t end(int64_t i) const { return rows * (i + 1) / count; }

  int64_t rows;
  int64_t count;
};

}  // namespace tinylm
