#include "train/precision.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace tinylm {

std::set<std::string> cpu_flags() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    std::set<std::string> flags;
    for (std::string w; words >> w;) flags.insert(w);
    return flags;
  }
  return {};
}

std::string cpu_description() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, name = "an unknown CPU", family, model;
  // The family and model tell CPUs apart that share a name ("AMD EPYC" in a VM).
  const auto value = [&] {
    const size_t colon = line.find(':');
    return colon == std::string::npos ? std::string()
                                      : line.substr(std::min(colon + 2, line.size()));
  };
  while (std::getline(in, line) && line.rfind("model name", 0) != 0) {
    if (line.rfind("cpu family", 0) == 0) family = value();
    if (line.rfind("model\t", 0) == 0 || line.rfind("model ", 0) == 0) model = value();
  }
  if (!in.eof()) name = value();
  if (!family.empty()) name += ", family " + family + " model " + model;
  const std::set<std::string> flags = cpu_flags();
  std::string units;
  for (const char* unit : {"avx2", "fma", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile"}) {
    if (flags.count(unit)) units += (units.empty() ? "" : " ") + std::string(unit);
  }
  return name + " (" + (units.empty() ? "no AVX2" : units) + ")";
}

std::string malloc_library() {
  Dl_info info{};
  // The address of malloc as this binary resolves it: the interposed one, if any.
  if (::dladdr(reinterpret_cast<void*>(&::malloc), &info) == 0 || !info.dli_fname)
    return "an unknown library";
  return std::filesystem::path(info.dli_fname).filename().string();
}

std::optional<std::string> bfloat16_matmul_refusal() {
  static const std::optional<std::string> refusal = []() -> std::optional<std::string> {
    try {
      // 32^3 multiply-adds: LibTorch makes products under 16^3 itself, without oneDNN.
      const torch::Tensor a = torch::ones({32, 32}, torch::kBFloat16);
      torch::mm(a, a);
      return std::nullopt;
    } catch (const std::exception& e) {
      const std::string what = e.what();  // c10::Error's first line, without its backtrace
      return what.substr(0, what.find('\n'));
    }
  }();
  return refusal;
}

PrecisionChoice choose_precision(
    Dtype requested, const torch::Device& device, const std::set<std::string>& flags,
    const std::function<std::optional<std::string>()>& bfloat16_refusal) {
  const auto refused = [&]() -> std::optional<std::string> {
    if (!device.is_cpu()) return std::nullopt;
    return bfloat16_refusal();
  };
  if (requested == Dtype::kBfloat16) {
    if (const auto why = refused()) {
      throw std::invalid_argument(
          "train.dtype = \"bfloat16\": no bfloat16 matmul can be made here (" + *why +
          "); is ONEDNN_MAX_CPU_ISA or DNNL_MAX_CPU_ISA set below the CPU's bfloat16 units? "
          "Use train.dtype = \"float32\" or \"auto\"");
    }
  }
  if (requested != Dtype::kAuto)
    return {requested, "train.dtype = \"" + std::string(name_of(requested)) + "\""};
  if (device.is_cuda()) return {Dtype::kBfloat16, "auto: a CUDA device"};
  for (const char* unit : {"amx_bf16", "avx512_bf16"}) {
    if (!flags.count(unit)) continue;
    if (const auto why = refused()) {
      return {Dtype::kFloat32, std::string("auto: the CPU has ") + unit +
                                   ", but no bfloat16 matmul can be made here (" + *why +
                                   "; ONEDNN_MAX_CPU_ISA or DNNL_MAX_CPU_ISA set?)"};
    }
    return {Dtype::kBfloat16, std::string("auto: the CPU has ") + unit};
  }
  return {Dtype::kFloat32, flags.empty()
                               ? "auto: the CPU's flags could not be read"
                               : "auto: the CPU has neither amx_bf16 nor avx512_bf16, so bfloat16 "
                                 "would be emulated, slower than float32"};
}

}  // namespace tinylm
