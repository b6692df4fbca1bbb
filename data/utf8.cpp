#include "data/utf8.h"

#include <cstdio>
#include <stdexcept>

namespace tinylm {
namespace {

// Decodes one code point starting at bytes[i]; returns its length, or 0 if invalid.
size_t decode_one(std::string_view bytes, size_t i, char32_t& cp) {
  const auto b0 = static_cast<unsigned char>(bytes[i]);
  if (b0 < 0x80) {
    cp = b0;
    return 1;
  }
  size_t len;
  char32_t min;
  if ((b0 & 0xE0) == 0xC0) {
    len = 2;
    cp = b0 & 0x1F;
    min = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    len = 3;
    cp = b0 & 0x0F;
    min = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    len = 4;
    cp = b0 & 0x07;
    min = 0x10000;
  } else {
    return 0;
  }
  if (i + len > bytes.size()) return 0;
  for (size_t k = 1; k < len; ++k) {
    const auto b = static_cast<unsigned char>(bytes[i + k]);
    if ((b & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return len;
}

}  // namespace

size_t find_invalid_utf8(std::string_view bytes) {
  char32_t cp;
  for (size_t i = 0; i < bytes.size();) {
    const size_t len = decode_one(bytes, i, cp);
    if (len == 0) return i;
    i += len;
  }
  return std::string_view::npos;
}

std::vector<char32_t> decode_utf8(std::string_view bytes, std::string_view source) {
  std::vector<char32_t> out;
  out.reserve(bytes.size());
  char32_t cp;
  for (size_t i = 0; i < bytes.size();) {
    const size_t len = decode_one(bytes, i, cp);
    if (len == 0) {
      char byte[8];
      std::snprintf(byte, sizeof byte, "0x%02X", static_cast<unsigned char>(bytes[i]));
      throw std::runtime_error(std::string(source) + " is not valid UTF-8: bad byte " + byte +
                               " at byte offset " + std::to_string(i));
    }
    out.push_back(cp);
    i += len;
  }
  return out;
}

namespace {

// The bytes of an invalid sequence that one U+FFFD stands for: a lead byte with the
// continuation bytes that follow it, short of a whole character (Unicode's "maximal subpart",
// as Python's errors="replace" counts them), or a byte alone.
size_t invalid_prefix(std::string_view tail) {
  const auto lead = static_cast<unsigned char>(tail[0]);
  const size_t length = lead >= 0xC2 && lead <= 0xDF   ? 2
                        : lead >= 0xE0 && lead <= 0xEF ? 3
                        : lead >= 0xF0 && lead <= 0xF4 ? 4
                                                       : 1;
  size_t n = 1;
  while (n < length && n < tail.size() && (static_cast<unsigned char>(tail[n]) & 0xC0) == 0x80) ++n;
  return n;
}

}  // namespace

std::string printable_utf8(std::string_view bytes, bool final, size_t& used, size_t& replaced) {
  std::string out;
  size_t at = 0;
  while (at < bytes.size()) {
    const size_t bad = find_invalid_utf8(bytes.substr(at));
    if (bad == std::string_view::npos) {
      out += bytes.substr(at);
      at = bytes.size();
      break;
    }
    out += bytes.substr(at, bad);
    at += bad;
    const size_t n = invalid_prefix(bytes.substr(at));
    if (!final && at + n == bytes.size()) break;  // a character the next piece may complete
    out += "\xEF\xBF\xBD";                        // U+FFFD REPLACEMENT CHARACTER
    at += n;
    replaced += n;
  }
  used = at;
  return out;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::string describe_code_point(char32_t cp) {
  std::string shown;
  switch (cp) {
    case '\n': shown = "\\n"; break;
    case '\r': shown = "\\r"; break;
    case '\t': shown = "\\t"; break;
    default:
      if (cp < 0x20 || cp == 0x7F) {
        shown = "?";
      } else {
        append_utf8(shown, cp);
      }
  }
  char hex[16];
  std::snprintf(hex, sizeof hex, "U+%04X", static_cast<unsigned>(cp));
  return "'" + shown + "' (" + hex + ")";
}

}  // namespace tinylm
