#pragma once
// The training text: one UTF-8 file, or every *.txt file under a directory (recursively,
// in sorted path order, concatenated as they are). Validated as UTF-8 on read; an error
// names the file and the byte offset. Empty files in a directory are skipped with a
// warning that names them. Knows nothing about tokens.

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace tinylm {

// The files a corpus path stands for, in the order they are read.
// `origin` names where the path came from (a config key or a flag) in the errors.
std::vector<std::filesystem::path> corpus_files(const std::filesystem::path& path,
                                                const std::string& origin = "data.path");

// Reads and validates the corpus; throws if missing, empty or not UTF-8.
std::string read_corpus(const std::filesystem::path& path);

// Where a text may be cut: the largest offset that ends a chunk, or npos for none.
using CutPoint = std::function<size_t(std::string_view text)>;

// Just after the last '\n': where every tokenizer but GPT-2's may cut (data/tokenizer.h).
size_t after_last_newline(std::string_view text);

// Reads files in chunks of about `chunk_bytes` that end at a cut point (by default just
// after a '\n'; a tokenizer's own, Tokenizer::cut_point) or at the end of a file, so memory
// stays bounded however large the corpus. Text with no cut point in 16 chunks is cut at a
// character boundary, with a warning. Every chunk is validated as UTF-8.
class CorpusReader {
 public:
  struct Chunk {
    std::string text;
    std::filesystem::path file;
    uint64_t offset = 0;  // of text[0] in the file
  };

  CorpusReader(std::vector<std::filesystem::path> files, size_t chunk_bytes,
               CutPoint cut_point = after_last_newline);
  // False when every file is read.
  bool next(Chunk& chunk);
  uint64_t total_bytes() const { return total_bytes_; }
  uint64_t bytes_read() const { return bytes_read_; }

 private:
  bool open_next_file();
  std::vector<std::filesystem::path> files_;
  size_t chunk_bytes_;
  CutPoint cut_point_;
  size_t next_file_ = 0;
  std::ifstream in_;
  std::filesystem::path file_;
  uint64_t file_offset_ = 0;
  std::string carry_;  // the unfinished line at the end of the last read
  uint64_t total_bytes_ = 0;
  uint64_t bytes_read_ = 0;
  bool warned_long_line_ = false;
};

}  // namespace tinylm
