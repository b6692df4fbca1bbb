#include "data/corpus.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "data/utf8.h"

namespace tinylm {
namespace fs = std::filesystem;

std::vector<fs::path> corpus_files(const fs::path& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    throw std::runtime_error("corpus not found: " + path.string() +
                             " (set [data] path to a UTF-8 text file or a directory of *.txt)");
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
    throw std::runtime_error("corpus directory " + path.string() + " has no *.txt files");
  }
  return files;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path.string());
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) throw std::runtime_error("cannot read " + path.string());
  return buffer.str();
}

std::string read_corpus(const fs::path& path) {
  std::string text;
  for (const auto& file : corpus_files(path)) {
    std::string part = read_file(file);
    const size_t bad = find_invalid_utf8(part);
    if (bad != std::string::npos) {
      decode_utf8(part, file.string());  // throws the detailed message
    }
    text += part;
  }
  if (text.empty()) throw std::runtime_error("corpus " + path.string() + " is empty");
  return text;
}

}  // namespace tinylm
