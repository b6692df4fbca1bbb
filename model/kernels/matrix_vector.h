#pragma once
// y = W x + b for one row x: the products of single-stream decoding (model/ops/decode_step.h),
// where every weight is read once per token and the speed is memory bandwidth. OpenBLAS's
// single-threaded sgemv reaches half of it on some machines (an AVX-512 EPYC read 8 GB/s
// where a plain vectorised loop read 18 GB/s; docs/MEASUREMENTS.md), so this is a loop of
// dot products over W's rows, compiled for AVX-512, AVX2 and baseline x86-64 and chosen at
// run time from the CPU's flags (vector_isa.h), the rows split over LibTorch's intra-op
// threads.

#include <cstdint>
#include <optional>

#include "model/kernels/vector_isa.h"

namespace tinylm {

// W row-major (out, in); bias may be null. y must not alias x. `isa`: the build to use (it
// must be one cpu_runs); by default the widest.
void matrix_vector(const float* W, int64_t out, int64_t in, const float* x, const float* bias,
                   float* y, std::optional<VectorIsa> isa = std::nullopt);

}  // namespace tinylm
