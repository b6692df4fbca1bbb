#pragma once
// The safetensors format: an 8-byte little-endian header length, a JSON header mapping each
// name to {dtype, shape, data_offsets} (plus an optional "__metadata__" of strings), then
// the raw little-endian bytes. Reading validates everything before trusting it: header
// length within the file, offsets in bounds and non-overlapping, byte counts that agree
// with dtype and shape. Supported dtypes: F32, F64, F16, BF16, I64, I32, U8.
// Every file tinylm writes carries each tensor's XXH3-64 checksum in __metadata__ (the key
// "xxh3_64:NAME", 16 hex digits; data/io/checksum.h), which any safetensors reader ignores
// and tinylm verifies on every read.

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
  std::map<std::string, std::string> metadata;  // without the checksums
  bool checksummed = false;                     // every tensor had a checksum, and matched it
};

// The metadata key of a tensor's checksum.
std::string checksum_key(const std::string& tensor_name);

// Serialises the tensors (CPU, contiguous copies are made as needed) in the order given.
std::string encode_safetensors(const NamedTensors& tensors,
                               const std::map<std::string, std::string>& metadata = {});

// Parses and validates; `source` names the file in errors. A tensor whose bytes do not match
// its checksum is an IntegrityError naming the file and the tensor. Files without checksums
// (from elsewhere, or from tinylm before 0.2) read as before, with checksummed false.
Safetensors decode_safetensors(const std::string& bytes, const std::string& source);

// Atomic write / validated read of a file. The write returns the checksum of the whole
// file's bytes (a checkpoint's manifest records it without reading the file back).
std::string save_safetensors(const std::filesystem::path& path, const NamedTensors& tensors,
                             const std::map<std::string, std::string>& metadata = {});
Safetensors load_safetensors(const std::filesystem::path& path);

}  // namespace tinylm
