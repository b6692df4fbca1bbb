#pragma once
// Crash-safe file writes: the bytes go to a temporary name in the same directory, are
// flushed to disk, then renamed over the target. A crash mid-write leaves the old file whole.

#include <filesystem>
#include <string_view>

namespace tinylm {

void write_file_atomic(const std::filesystem::path& path, std::string_view bytes);

}  // namespace tinylm
