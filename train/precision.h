#pragma once
// train.dtype = "auto": the precision of the matmuls, chosen at run time from what the
// hardware has. bfloat16 autocast where the CPU has bfloat16 units (AMX-BF16 on Sapphire
// Rapids and later, AVX512-BF16 on Cooper Lake and Zen 4/5), float32 elsewhere: without
// those units LibTorch emulates bfloat16 and its matmuls run many times slower than float32
// (20x on an AVX2-only EPYC). On CUDA, bfloat16. Weights, gradients, AdamW state and
// checkpoints stay float32 either way.

#include <functional>
#include <optional>
#include <set>
#include <string>

#include <torch/torch.h>

#include "train/run/run_config.h"

namespace tinylm {

struct PrecisionChoice {
  Dtype dtype;         // float32 or bfloat16, never auto
  std::string reason;  // for the log and state.json
};

// The flags of the first processor in /proc/cpuinfo ("avx2", "amx_bf16", ...); empty where
// there is no such file.
std::set<std::string> cpu_flags();
// "AMD EPYC (avx2 fma)": the model name and the vector units among the flags, for figures
// that must say which machine made them.
std::string cpu_description();
// The file of the library whose malloc this process calls ("libtcmalloc_minimal.so.4",
// "libc.so.6"): LibTorch allocates every tensor through it, and a step's time depends on it.
std::string malloc_library();

// Why this process cannot make a bfloat16 matmul on the CPU; nothing where it can. One
// product through LibTorch's path to oneDNN, tried once. It fails where oneDNN is capped
// below the CPU's bfloat16 units (ONEDNN_MAX_CPU_ISA or DNNL_MAX_CPU_ISA) while LibTorch,
// reading the CPU itself, still hands it bfloat16.
std::optional<std::string> bfloat16_matmul_refusal();

// `bfloat16_refusal` is asked only where bfloat16 would be chosen on the CPU: "auto" then
// falls back to float32, and an explicit "bfloat16" is refused (std::invalid_argument).
PrecisionChoice choose_precision(
    Dtype requested, const torch::Device& device, const std::set<std::string>& flags,
    const std::function<std::optional<std::string>()>& bfloat16_refusal = bfloat16_matmul_refusal);

}  // namespace tinylm
