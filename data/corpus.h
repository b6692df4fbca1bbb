#pragma once
// The training text: one UTF-8 file, or every *.txt file under a directory (recursively,
// in sorted path order, concatenated as they are). Validated as UTF-8 on read; an error
// names the file and the byte offset. Knows nothing about tokens.

#include <filesystem>
#include <string>
#include <vector>

namespace tinylm {

// The files a corpus path stands for, in the order they are read.
std::vector<std::filesystem::path> corpus_files(const std::filesystem::path& path);

// Reads and validates the corpus; throws if missing, empty or not UTF-8.
std::string read_corpus(const std::filesystem::path& path);

// Reads one file whole; throws with the path if it cannot be read.
std::string read_file(const std::filesystem::path& path);

}  // namespace tinylm
