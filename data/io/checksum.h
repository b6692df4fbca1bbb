#pragma once
// The checksum of every tensor and file a run writes: XXH3, 64 bits (xxHash 0.8), as 16
// lowercase hex digits. Why XXH3: it hashes at memory speed (tens of GB/s), so verifying a
// checkpoint on every load costs less than reading it; its output is fixed by a published
// specification, so files written today verify with any later xxHash; and Python reads it
// with the `xxhash` package (Debian's python3-xxhash). Not cryptographic: it catches disks and
// copies that rot, not an adversary.

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace tinylm {

inline constexpr const char* kChecksumAlgorithm = "xxh3_64";

uint64_t xxh3_64(std::string_view bytes);
std::string checksum_hex(std::string_view bytes);  // to_hex(xxh3_64(bytes))

// Seconds this process has spent computing checksums (for tinylm bench).
double seconds_in_checksums();

// Bytes on disk that no longer match the checksum written with them.
struct IntegrityError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace tinylm
