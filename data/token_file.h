#pragma once
// Token files: a corpus split, tokenized once, read memory-mapped. Layout (little-endian):
//   0  magic "TLMTOKEN"     8  u32 version (1)      12 u32 bytes per token (2 or 4)
//   16 u64 token count      24 u64 UTF-8 bytes of the text the tokens stand for
//   32 u64 vocabulary size  40 u64 tokenizer fingerprint   48 u64 source fingerprint
//   56 u64 zero             64 the ids, uint16 when the vocabulary fits, else uint32
// (numpy: np.memmap(path, dtype=np.uint16, mode="r", offset=64)). The fingerprints say which
// tokenizer and which text made the file, so a stale cache is rebuilt, never reused. Files
// are written under a temporary name and renamed when whole; opening one checks the magic,
// the version and that the size matches the count.

#include <cstdint>
#include <filesystem>
#include <memory>

#include "data/io/atomic_file.h"
#include "data/token_sequence.h"

namespace tinylm {

inline constexpr uint64_t kTokenFileHeaderBytes = 64;
inline constexpr uint32_t kTokenFileVersion = 1;

struct TokenFileHeader {
  uint32_t token_width = 2;
  uint64_t count = 0;
  uint64_t text_bytes = 0;
  uint64_t vocab_size = 0;
  uint64_t tokenizer_fingerprint = 0;
  uint64_t source_fingerprint = 0;
};

// 2 when every id fits in uint16, else 4.
uint32_t token_width_for(int64_t vocab_size);

// Reads and checks the header (not the ids); throws naming the file and what is wrong.
TokenFileHeader read_token_file_header(const std::filesystem::path& path);

class TokenFileWriter {
 public:
  TokenFileWriter(std::filesystem::path path, TokenFileHeader header);
  void append(const int64_t* ids, size_t count);
  uint64_t count() const { return header_.count; }
  // Reads ids already written, [start, start + count).
  void read_back(uint64_t start, uint64_t count, int64_t* out) const;
  // Drops every id from `count` on.
  void truncate(uint64_t count);
  // Writes the final header and renames the file into place.
  void commit(uint64_t text_bytes);

 private:
  TokenFileHeader header_;
  AtomicFileWriter file_;
  std::string buffer_;
};

// A token file mapped into memory; its tokens stay valid while any TokenSequence of it lives.
struct TokenFile {
  TokenFileHeader header;
  TokenSequence tokens;
  TokenSplit split() const { return {tokens, header.text_bytes}; }
};
TokenFile open_token_file(const std::filesystem::path& path);

}  // namespace tinylm
