#pragma once
// Strict UTF-8 decoding and encoding of Unicode code points. Invalid input (bad lead or
// continuation bytes, overlong forms, surrogates, values past U+10FFFF, a truncated tail)
// is an error naming the byte offset. No normalisation, no BOM stripping: text is kept
// exactly as written so that decode(encode(text)) == text.

#include <string>
#include <string_view>
#include <vector>

namespace tinylm {

// Decodes `bytes`; `source` names the input in the error message (a file path, "the prompt").
std::vector<char32_t> decode_utf8(std::string_view bytes, std::string_view source);

// Returns the byte offset of the first invalid sequence, or npos when `bytes` is valid.
size_t find_invalid_utf8(std::string_view bytes);

void append_utf8(std::string& out, char32_t code_point);

// Bytes made fit to print, for text that arrives in pieces (a sample, token by token): each
// invalid byte becomes U+FFFD. An incomplete sequence at the end is held back for the next
// piece, unless `final`. Returns the text; `used` is how many bytes of `bytes` it covers and
// `replaced` counts the bytes replaced.
std::string printable_utf8(std::string_view bytes, bool final, size_t& used, size_t& replaced);

// A code point as a person reads it in an error: 'a' (U+0061), '\n' (U+000A).
std::string describe_code_point(char32_t code_point);

}  // namespace tinylm
