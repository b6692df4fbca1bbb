#pragma once
// What every fuzz target shares. A target feeds one loader the fuzzer's bytes, as the file it
// reads. The loader refusing them with our error type (std::runtime_error: every loader's
// errors, IntegrityError among them) is the right answer. Anything else is a finding, and
// libFuzzer reports it: a crash or a sanitizer report, any other exception (it escapes and
// aborts), a hang past -timeout=10, an allocation past -malloc_limit_mb=1024 (a header that
// claims 2^60 elements must be refused before anything is allocated).

#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include <spdlog/spdlog.h>

namespace tinylm::fuzz {

// A directory of this process's own for the files a loader reads, removed at exit.
inline const std::filesystem::path& scratch_dir() {
  static const std::filesystem::path dir = [] {
    std::string pattern = (std::filesystem::temp_directory_path() / "tinylm-fuzz-XXXXXX").string();
    if (!::mkdtemp(pattern.data())) std::abort();
    std::atexit([] { std::filesystem::remove_all(scratch_dir()); });
    spdlog::set_level(spdlog::level::off);  // notices about the inputs are not findings
    return std::filesystem::path(pattern);
  }();
  return dir;
}

inline void write_file(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Runs `load` on the input; our error type is a refusal, not a finding.
template <class Load>
int run(const uint8_t* data, size_t size, Load&& load) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    load(bytes);
  } catch (const std::runtime_error&) {}
  return 0;
}

}  // namespace tinylm::fuzz
