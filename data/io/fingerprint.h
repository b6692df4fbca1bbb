#pragma once
// A 64-bit FNV-1a hash, for recognising inputs (corpus files, tokenizers) that have not
// changed. Not cryptographic: it guards a cache against mistakes, not against an adversary.

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace tinylm {

class Fingerprint {
 public:
  Fingerprint& add(std::string_view bytes) {
    for (const unsigned char c : bytes) hash_ = (hash_ ^ c) * 0x100000001b3ULL;
    return *this;
  }
  // Length-prefixed, so that ("ab", "c") and ("a", "bc") differ.
  Fingerprint& add_field(std::string_view bytes) {
    add(std::to_string(bytes.size()) + ":");
    return add(bytes);
  }
  uint64_t value() const { return hash_; }

 private:
  uint64_t hash_ = 0xcbf29ce484222325ULL;
};

inline std::string to_hex(uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
  return text;
}

}  // namespace tinylm
