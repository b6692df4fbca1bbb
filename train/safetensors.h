#pragma once
// The safetensors format: an 8-byte little-endian header length, a JSON header mapping each
// name to {dtype, shape, data_offsets} (plus an optional "__metadata__" of strings), then
// the raw little-endian bytes. Reading validates everything before trusting it: header
// length within the file, offsets in bounds and non-overlapping, byte counts that agree
// with dtype and shape. Supported dtypes: F32, F64, F16, BF16, I64, I32, U8.

#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

namespace tinylm {

using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

struct Safetensors {
  std::map<std::string, torch::Tensor> tensors;
  std::map<std::string, std::string> metadata;
};

// Serialises the tensors (CPU, contiguous copies are made as needed) in the order given.
std::string encode_safetensors(const NamedTensors& tensors,
                               const std::map<std::string, std::string>& metadata = {});

// Parses and validates; `source` names the file in errors.
Safetensors decode_safetensors(const std::string& bytes, const std::string& source);

// Atomic write / validated read of a file.
void save_safetensors(const std::filesystem::path& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata = {});
Safetensors load_safetensors(const std::filesystem::path& path);

}  // namespace tinylm
