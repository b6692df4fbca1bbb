#include "data/token_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

namespace tinylm {
namespace fs = std::filesystem;

namespace {

constexpr char kMagic[8] = {'T', 'L', 'M', 'T', 'O', 'K', 'E', 'N'};

template <class T>
void put(std::string& out, size_t offset, T value) {
  std::memcpy(out.data() + offset, &value, sizeof value);  // the machine is little-endian
}

template <class T>
T get(const unsigned char* in, size_t offset) {
  T value;
  std::memcpy(&value, in + offset, sizeof value);
  return value;
}

std::string encode_header(const TokenFileHeader& h) {
  std::string out(kTokenFileHeaderBytes, '\0');
  std::memcpy(out.data(), kMagic, sizeof kMagic);
  put<uint32_t>(out, 8, kTokenFileVersion);
  put<uint32_t>(out, 12, h.token_width);
  put<uint64_t>(out, 16, h.count);
  put<uint64_t>(out, 24, h.text_bytes);
  put<uint64_t>(out, 32, h.vocab_size);
  put<uint64_t>(out, 40, h.tokenizer_fingerprint);
  put<uint64_t>(out, 48, h.source_fingerprint);
  return out;
}

TokenFileHeader decode_header(const unsigned char* in, uint64_t file_size, const fs::path& path) {
  const auto bad = [&](const std::string& what) {
    return std::runtime_error(path.string() + " is not a usable token file: " + what);
  };
  if (file_size < kTokenFileHeaderBytes) throw bad("shorter than its 64-byte header");
  if (std::memcmp(in, kMagic, sizeof kMagic) != 0) throw bad("it does not start with TLMTOKEN");
  const auto version = get<uint32_t>(in, 8);
  if (version != kTokenFileVersion) {
    throw bad("format version " + std::to_string(version) + ", this tinylm reads " +
              std::to_string(kTokenFileVersion));
  }
  TokenFileHeader h;
  h.token_width = get<uint32_t>(in, 12);
  h.count = get<uint64_t>(in, 16);
  h.text_bytes = get<uint64_t>(in, 24);
  h.vocab_size = get<uint64_t>(in, 32);
  h.tokenizer_fingerprint = get<uint64_t>(in, 40);
  h.source_fingerprint = get<uint64_t>(in, 48);
  if (h.token_width != 2 && h.token_width != 4) {
    throw bad(std::to_string(h.token_width) + " bytes per token (2 or 4 expected)");
  }
  if (h.count > (file_size - kTokenFileHeaderBytes) / h.token_width ||
      kTokenFileHeaderBytes + h.count * h.token_width != file_size) {
    throw bad("the header says " + std::to_string(h.count) + " tokens but the file has " +
              std::to_string(file_size) + " bytes (truncated or corrupted)");
  }
  return h;
}

}  // namespace

uint32_t token_width_for(int64_t vocab_size) { return vocab_size <= 65536 ? 2 : 4; }

TokenFileHeader read_token_file_header(const fs::path& path) {
  std::error_code ec;
  const uint64_t size = fs::file_size(path, ec);
  if (ec) throw std::runtime_error("cannot read " + path.string() + ": " + ec.message());
  unsigned char header[kTokenFileHeaderBytes] = {};
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    throw std::runtime_error("cannot open " + path.string() + ": " + std::strerror(errno));
  const ssize_t n = ::pread(fd, header, sizeof header, 0);
  ::close(fd);
  if (n < 0 || static_cast<uint64_t>(n) < std::min<uint64_t>(size, kTokenFileHeaderBytes)) {
    throw std::runtime_error("cannot read " + path.string());
  }
  return decode_header(header, size, path);
}

TokenFileWriter::TokenFileWriter(fs::path path, TokenFileHeader header)
    : header_(header), file_(std::move(path)) {
  header_.count = 0;
  file_.write(encode_header(header_));
}

void TokenFileWriter::append(const int64_t* ids, size_t count) {
  buffer_.resize(count * header_.token_width);
  for (size_t i = 0; i < count; ++i) {
    if (header_.token_width == 2) {
      const auto v = static_cast<uint16_t>(ids[i]);
      std::memcpy(buffer_.data() + 2 * i, &v, 2);
    } else {
      const auto v = static_cast<uint32_t>(ids[i]);
      std::memcpy(buffer_.data() + 4 * i, &v, 4);
    }
  }
  file_.write(buffer_);
  header_.count += count;
}

void TokenFileWriter::read_back(uint64_t start, uint64_t count, int64_t* out) const {
  const int fd = ::open(file_.temporary_path().c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("cannot read back " + file_.temporary_path().string());
  std::string bytes(count * header_.token_width, '\0');
  const ssize_t n =
      ::pread(fd, bytes.data(), bytes.size(),
              static_cast<off_t>(kTokenFileHeaderBytes + start * header_.token_width));
  ::close(fd);
  if (n != static_cast<ssize_t>(bytes.size())) {
    throw std::runtime_error("cannot read back " + file_.temporary_path().string());
  }
  const TokenSequence view(nullptr, bytes.data(), static_cast<int>(header_.token_width),
                           static_cast<int64_t>(count));
  view.copy_to(0, static_cast<int64_t>(count), out);
}

void TokenFileWriter::truncate(uint64_t count) {
  file_.truncate(kTokenFileHeaderBytes + count * header_.token_width);
  header_.count = count;
}

void TokenFileWriter::commit(uint64_t text_bytes) {
  header_.text_bytes = text_bytes;
  file_.write_at(0, encode_header(header_));
  file_.commit();
}

TokenFile open_token_file(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    throw std::runtime_error("cannot open " + path.string() + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    throw std::runtime_error("cannot read " + path.string() + ": " + std::strerror(errno));
  }
  const auto size = static_cast<uint64_t>(st.st_size);
  void* mapped = size ? ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0) : MAP_FAILED;
  ::close(fd);
  if (mapped == MAP_FAILED) {
    if (size == 0) decode_header(nullptr, 0, path);  // throws: empty
    throw std::runtime_error("cannot map " + path.string() + ": " + std::strerror(errno));
  }
  std::shared_ptr<const void> owner(
      mapped, [size](const void* p) { ::munmap(const_cast<void*>(p), size); });
  const auto* bytes = static_cast<const unsigned char*>(mapped);
  TokenFile file;
  file.header = decode_header(bytes, size, path);
  ::madvise(mapped, size, MADV_RANDOM);  // training reads windows at random offsets
  file.tokens =
      TokenSequence(owner, bytes + kTokenFileHeaderBytes, static_cast<int>(file.header.token_width),
                    static_cast<int64_t>(file.header.count));
  return file;
}

}  // namespace tinylm
