#include "data/io/checksum.h"

#include <xxhash.h>

#include "data/io/fingerprint.h"

namespace tinylm {

uint64_t xxh3_64(std::string_view bytes) { return XXH3_64bits(bytes.data(), bytes.size()); }

std::string checksum_hex(std::string_view bytes) { return to_hex(xxh3_64(bytes)); }

}  // namespace tinylm
