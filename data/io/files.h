#pragma once
// Files read whole, and recognised by content. With atomic_file.h (writes) and
// fingerprint.h (the hash), the file utilities that data/ and train/ share; nothing here
// knows about corpora, tokens or models.

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace tinylm {

// Reads one file whole; throws with the path if it cannot be read.
std::string read_file(const std::filesystem::path& path);

// A hash of the files' names and contents, read in pieces.
uint64_t fingerprint_files(const std::vector<std::filesystem::path>& files);

}  // namespace tinylm
