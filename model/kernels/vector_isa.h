#pragma once
// The vector instruction sets a hand-vectorised kernel is built for (AVX-512 F and VL with
// FMA, so that its 256-bit tails fuse their multiply-adds too; AVX2 with FMA; baseline x86-64), and
// which of them this CPU runs: a kernel compiles its loop once per set and picks the widest at run
// time, and a test may ask for each by name, so that one machine checks every build its CPU can
// run.

namespace tinylm {

enum class VectorIsa { kAvx512, kAvx2, kBaseline };

// Whether this CPU runs the build for `isa`; the widest one it runs.
bool cpu_runs(VectorIsa isa);
VectorIsa widest_vector_isa();

}  // namespace tinylm
