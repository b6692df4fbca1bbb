#include "data/io/checksum.h"

#include <xxhash.h>

#include <atomic>
#include <chrono>

#include "data/io/fingerprint.h"

namespace tinylm {

namespace {
std::atomic<int64_t> checksum_nanoseconds{0};
}  // namespace

uint64_t xxh3_64(std::string_view bytes) {
  const auto start = std::chrono::steady_clock::now();
  const uint64_t hash = XXH3_64bits(bytes.data(), bytes.size());
  checksum_nanoseconds +=
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
          .count();
  return hash;
}

double seconds_in_checksums() { return static_cast<double>(checksum_nanoseconds.load()) * 1e-9; }

std::string checksum_hex(std::string_view bytes) { return to_hex(xxh3_64(bytes)); }

}  // namespace tinylm
