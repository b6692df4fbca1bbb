#include "model/kernels/vector_isa.h"

namespace tinylm {

bool cpu_runs(VectorIsa isa) {
#if defined(__x86_64__)
  switch (isa) {
    case VectorIsa::kAvx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
             __builtin_cpu_supports("fma");
    case VectorIsa::kAvx2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case VectorIsa::kBaseline: return true;
  }
#endif
  return isa == VectorIsa::kBaseline;
}

VectorIsa widest_vector_isa() {
  static const VectorIsa widest = cpu_runs(VectorIsa::kAvx512) ? VectorIsa::kAvx512
                                  : cpu_runs(VectorIsa::kAvx2) ? VectorIsa::kAvx2
                                                               : VectorIsa::kBaseline;
  return widest;
}

}  // namespace tinylm
