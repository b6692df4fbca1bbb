#include "train/blas_core.h"

#include <dlfcn.h>

#include <cstdlib>

namespace tinylm {

std::string blas_core() {
  // Looked up, not linked: LibTorch may come with another BLAS.
  const auto corename =
      reinterpret_cast<char* (*)()>(::dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  const char* name = corename ? corename() : nullptr;
  return name ? name : "";
}

std::string describe_blas_core(const std::string& core, const char* coretype) {
  if (core.empty()) return "not OpenBLAS";
  std::string text = "OpenBLAS " + core + " kernels";
  if (coretype) text += std::string(" (OPENBLAS_CORETYPE=") + coretype + ")";
  return text;
}

std::string blas_core_description() {
  return describe_blas_core(blas_core(), std::getenv("OPENBLAS_CORETYPE"));
}

}  // namespace tinylm
