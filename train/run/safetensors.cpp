#include "train/run/safetensors.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "data/io/atomic_file.h"
#include "data/io/checksum.h"
#include "data/io/files.h"

namespace tinylm {
namespace {

constexpr uint64_t kMaxHeaderBytes = 100u << 20;  // the format's own limit

const std::vector<std::pair<std::string, torch::ScalarType>>& dtypes() {
  static const std::vector<std::pair<std::string, torch::ScalarType>> table = {
      {"F32", torch::kFloat32},   {"F64", torch::kFloat64}, {"F16", torch::kHalf},
      {"BF16", torch::kBFloat16}, {"I64", torch::kInt64},   {"I32", torch::kInt32},
      {"U8", torch::kUInt8}};
  return table;
}

std::string dtype_name(torch::ScalarType type) {
  for (const auto& [name, t] : dtypes()) {
    if (t == type) return name;
  }
  throw std::invalid_argument(std::string("safetensors: unsupported tensor dtype ") +
                              c10::toString(type));
}

std::string_view bytes_of(const torch::Tensor& t) {
  return {static_cast<const char*>(t.data_ptr()),
          static_cast<size_t>(t.numel() * t.element_size())};
}

}  // namespace

std::string checksum_key(const std::string& tensor_name) {
  return std::string(kChecksumAlgorithm) + ":" + tensor_name;
}

std::string encode_safetensors(const NamedTensors& tensors,
                               const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  std::map<std::string, std::string> with_checksums = metadata;
  std::vector<torch::Tensor> data;
  uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    const torch::Tensor t = tensor.detach().to(torch::kCPU).contiguous();
    const uint64_t bytes = static_cast<uint64_t>(t.numel()) * t.element_size();
    header[name] = {{"dtype", dtype_name(t.scalar_type())},
                    {"shape", t.sizes().vec()},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    with_checksums[checksum_key(name)] = checksum_hex(bytes_of(t));
    data.push_back(t);
  }
  if (!with_checksums.empty()) header["__metadata__"] = with_checksums;
  std::string json = header.dump();
  json.append((8 - json.size() % 8) % 8, ' ');  // pad so the data starts 8-byte aligned
  std::string out(8, '\0');
  const uint64_t n = json.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xFF);
  out += json;
  out.reserve(out.size() + offset);
  for (const torch::Tensor& t : data) out.append(bytes_of(t));
  return out;
}

namespace {

// Why a file is not safetensors, naming it.
struct Invalid {
  const std::string& source;
  std::runtime_error operator()(const std::string& what) const {
    return std::runtime_error(source + " is not a valid safetensors file: " + what);
  }
};

// The JSON header, after its length is checked against the file.
nlohmann::json read_header(const std::string& bytes, const Invalid& bad, uint64_t& header_len) {
  if (bytes.size() < 8) throw bad("shorter than its 8-byte header length");
  header_len = 0;
  for (int i = 0; i < 8; ++i) {
    header_len |= uint64_t(static_cast<unsigned char>(bytes[i])) << (8 * i);
  }
  if (header_len > kMaxHeaderBytes || header_len > bytes.size() - 8) {
    throw bad("header length " + std::to_string(header_len) + " exceeds the file (" +
              std::to_string(bytes.size()) + " bytes): truncated?");
  }
  nlohmann::json header;
  try {
    header =
        nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + 8 + static_cast<long>(header_len));
  } catch (const nlohmann::json::exception& e) {
    throw bad(std::string("header is not JSON (") + e.what() + ")");
  }
  if (!header.is_object()) throw bad("header is not a JSON object");
  return header;
}

// One tensor's entry, checked: a supported dtype, a shape, and offsets inside the data that
// hold exactly the bytes dtype and shape need. Copies the bytes out.
torch::Tensor read_tensor(const nlohmann::json& entry, const std::string& where, const char* data,
                          uint64_t data_size, const Invalid& bad,
                          std::pair<uint64_t, uint64_t>& span) {
  if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") ||
      !entry.contains("data_offsets")) {
    throw bad(where + "expected {dtype, shape, data_offsets}");
  }
  const auto& dtype = entry["dtype"];
  const auto found = std::find_if(dtypes().begin(), dtypes().end(), [&](const auto& d) {
    return dtype.is_string() && d.first == dtype.get<std::string>();
  });
  if (found == dtypes().end()) throw bad(where + "unsupported dtype " + dtype.dump());
  const auto& shape_json = entry["shape"];
  if (!shape_json.is_array()) throw bad(where + "shape is not an array");
  std::vector<int64_t> shape;
  uint64_t numel = 1;
  for (const auto& d : shape_json) {
    if (!d.is_number_unsigned()) throw bad(where + "shape has a non-integer or negative entry");
    const uint64_t dim = d.get<uint64_t>();
    if (dim != 0 && numel > (uint64_t(1) << 48) / dim) throw bad(where + "shape is too large");
    numel *= dim;
    shape.push_back(static_cast<int64_t>(dim));
  }
  const auto& offsets = entry["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
      !offsets[1].is_number_unsigned()) {
    throw bad(where + "data_offsets must be two non-negative integers");
  }
  const uint64_t begin = offsets[0].get<uint64_t>(), end = offsets[1].get<uint64_t>();
  if (begin > end || end > data_size) {
    throw bad(where + "data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
              "] fall outside the " + std::to_string(data_size) + " data bytes: truncated?");
  }
  const torch::ScalarType type = found->second;
  const uint64_t expected = numel * c10::elementSize(type);
  if (end - begin != expected) {
    throw bad(where + "holds " + std::to_string(end - begin) + " bytes but dtype and shape need " +
              std::to_string(expected));
  }
  span = {begin, end};
  torch::Tensor t = torch::empty(shape, torch::TensorOptions().dtype(type));
  if (expected > 0) std::memcpy(t.data_ptr(), data + begin, expected);
  return t;
}

// Checks every tensor against its checksum and moves the checksums out of the metadata. A
// file has a checksum for every tensor or for none; anything between is a damaged header.
void verify_checksums(Safetensors& file, const std::string& source) {
  const std::string prefix = checksum_key("");
  std::map<std::string, std::string> stored;
  for (auto it = file.metadata.begin(); it != file.metadata.end();) {
    if (it->first.compare(0, prefix.size(), prefix) == 0) {
      stored.emplace(it->first.substr(prefix.size()), it->second);
      it = file.metadata.erase(it);
    } else {
      ++it;
    }
  }
  if (stored.empty()) return;
  for (const auto& [name, checksum] : stored) {
    if (!file.tensors.count(name)) {
      throw IntegrityError(source + ": its header has a checksum for a tensor " + name +
                           " that it does not hold: the header is corrupted");
    }
  }
  for (const auto& [name, tensor] : file.tensors) {
    const auto it = stored.find(name);
    if (it == stored.end()) {
      throw IntegrityError(source + ": tensor " + name +
                           " has no checksum though the others do: the header is corrupted");
    }
    const std::string computed = checksum_hex(bytes_of(tensor));
    if (computed != it->second) {
      throw IntegrityError(source + ": tensor " + name + " fails its checksum (" +
                           kChecksumAlgorithm + " " + computed + ", recorded " + it->second +
                           "): the file is corrupted");
    }
  }
  file.checksummed = true;
}

}  // namespace

Safetensors decode_safetensors(const std::string& bytes, const std::string& source) {
  const Invalid bad{source};
  uint64_t header_len = 0;
  const nlohmann::json header = read_header(bytes, bad, header_len);
  const uint64_t data_size = bytes.size() - 8 - header_len;
  const char* data = bytes.data() + 8 + header_len;
  Safetensors out;
  std::vector<std::pair<uint64_t, uint64_t>> spans;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) throw bad("__metadata__ is not an object");
      for (const auto& [k, v] : entry.items()) {
        if (!v.is_string()) throw bad("__metadata__." + k + " is not a string");
        out.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    std::pair<uint64_t, uint64_t> span;
    out.tensors.emplace(name,
                        read_tensor(entry, "tensor " + name + ": ", data, data_size, bad, span));
    spans.push_back(span);
  }
  std::sort(spans.begin(), spans.end());
  for (size_t i = 1; i < spans.size(); ++i) {
    if (spans[i].first < spans[i - 1].second) throw bad("two tensors' data_offsets overlap");
  }
  verify_checksums(out, source);
  return out;
}

std::string save_safetensors(const std::filesystem::path& path, const NamedTensors& tensors,
                             const std::map<std::string, std::string>& metadata) {
  const std::string bytes = encode_safetensors(tensors, metadata);
  write_file_atomic(path, bytes);
  return checksum_hex(bytes);
}

Safetensors load_safetensors(const std::filesystem::path& path) {
  return decode_safetensors(read_file(path), path.string());
}

}  // namespace tinylm
