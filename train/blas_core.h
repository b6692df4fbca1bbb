#pragma once
// Which CPU kernels OpenBLAS runs, for figures that must say what ran: its float32 products
// are the float32 step's matmuls, the fused attention's products in every precision, and
// Muon's float32 iteration. A DYNAMIC_ARCH OpenBLAS (Debian's) picks them as it loads, from
// the CPU or from OPENBLAS_CORETYPE, which overrides the CPU: this project's sessions ran
// with OPENBLAS_CORETYPE=Haswell set, AVX2 kernels on a CPU whose AVX-512 ones multiply
// 1.6-1.8x faster (docs/MEASUREMENTS.md, round eight).

#include <string>

namespace tinylm {

// The name OpenBLAS gives the kernels it runs ("Haswell", "Cooperlake"); empty where the
// BLAS is not OpenBLAS.
std::string blas_core();

// "OpenBLAS Cooperlake kernels", "OpenBLAS Haswell kernels (OPENBLAS_CORETYPE=Haswell)" or
// "not OpenBLAS", of `core` (blas_core()) and OPENBLAS_CORETYPE's value (nullptr: unset).
std::string describe_blas_core(const std::string& core, const char* coretype);
// This process's.
std::string blas_core_description();

}  // namespace tinylm
