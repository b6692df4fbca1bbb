#include "data/corpus.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>

#include <spdlog/spdlog.h>

#include "data/utf8.h"

namespace tinylm {
namespace fs = std::filesystem;

std::vector<fs::path> corpus_files(const fs::path& path, const std::string& origin) {
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    throw std::runtime_error("corpus not found: " + path.string() + " (" + origin +
                             " must name a UTF-8 text file or a directory of *.txt)");
  }
  if (!fs::is_directory(path, ec)) return {path};
  std::vector<fs::path> files;
  for (const auto& entry : fs::recursive_directory_iterator(path)) {
    if (entry.is_regular_file() && entry.path().extension() == ".txt") {
      files.push_back(entry.path());
    }
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    throw std::runtime_error("corpus directory " + path.string() + " (" + origin +
                             ") has no *.txt files");
  }
  return files;
}

std::string read_corpus(const fs::path& path) {
  std::string text;
  CorpusReader reader(corpus_files(path), size_t{1} << 24);
  CorpusReader::Chunk chunk;
  while (reader.next(chunk)) text += chunk.text;
  if (text.empty()) throw std::runtime_error("corpus " + path.string() + " is empty");
  return text;
}

size_t after_last_newline(std::string_view text) {
  const size_t newline = text.rfind('\n');
  return newline == std::string_view::npos ? newline : newline + 1;
}

CorpusReader::CorpusReader(std::vector<fs::path> files, size_t chunk_bytes, CutPoint cut_point)
    : files_(std::move(files)),
      chunk_bytes_(std::max<size_t>(chunk_bytes, 64)),
      cut_point_(std::move(cut_point)) {
  for (const fs::path& file : files_) {
    std::error_code ec;
    const uint64_t size = fs::file_size(file, ec);
    if (ec) throw std::runtime_error("cannot read " + file.string() + ": " + ec.message());
    total_bytes_ += size;
  }
}

bool CorpusReader::open_next_file() {
  while (next_file_ < files_.size()) {
    file_ = files_[next_file_++];
    in_ = std::ifstream(file_, std::ios::binary);
    if (!in_) throw std::runtime_error("cannot open " + file_.string());
    file_offset_ = 0;
    carry_.clear();
    if (in_.peek() == std::ifstream::traits_type::eof()) {
      if (files_.size() > 1) spdlog::warn("skipping {}: the file is empty", file_.string());
      continue;
    }
    return true;
  }
  return false;
}

bool CorpusReader::next(Chunk& chunk) {
  if (!in_.is_open() || (carry_.empty() && in_.peek() == std::ifstream::traits_type::eof())) {
    if (!open_next_file()) return false;
  }
  std::string text = std::move(carry_);
  carry_.clear();
  // Read until the chunk holds a cut point past the target size, or the file ends.
  while (true) {
    const size_t have = text.size();
    text.resize(have + chunk_bytes_);
    in_.read(text.data() + have, static_cast<std::streamsize>(chunk_bytes_));
    text.resize(have + static_cast<size_t>(in_.gcount()));
    if (in_.bad()) throw std::runtime_error("cannot read " + file_.string());
    if (in_.eof()) break;
    const size_t cut = cut_point_(text);
    if (cut != std::string::npos && cut > 0) {
      carry_ = text.substr(cut);
      text.resize(cut);
      break;
    }
    if (text.size() >= 16 * chunk_bytes_) {  // one enormous line: cut at a character boundary
      size_t boundary = text.size();
      while (boundary > 0 && (static_cast<unsigned char>(text[boundary - 1]) & 0xC0) == 0x80)
        --boundary;
      if (boundary > 0 && static_cast<unsigned char>(text[boundary - 1]) >= 0xC0) --boundary;
      carry_ = text.substr(boundary);
      text.resize(boundary);
      if (!warned_long_line_) {
        spdlog::warn(
            "{} has more than {:.3g} MB without a line end to cut at; it is read in "
            "pieces cut between characters",
            file_.string(), static_cast<double>(16 * chunk_bytes_) / (1 << 20));
        warned_long_line_ = true;
      }
      break;
    }
  }
  const size_t bad = find_invalid_utf8(text);
  if (bad != std::string::npos) {
    // The message from the decoder, with the offset in the file rather than in the chunk.
    char byte[8];
    std::snprintf(byte, sizeof byte, "0x%02X", static_cast<unsigned char>(text[bad]));
    throw std::runtime_error(file_.string() + " is not valid UTF-8: bad byte " + byte +
                             " at byte offset " + std::to_string(file_offset_ + bad) +
                             " (the corpus must be UTF-8 text; convert it, e.g. with iconv)");
  }
  chunk.text = std::move(text);
  chunk.file = file_;
  chunk.offset = file_offset_;
  file_offset_ += chunk.text.size();
  bytes_read_ += chunk.text.size();
  return true;
}

}  // namespace tinylm
