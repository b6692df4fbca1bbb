#include "data/gpt2_tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <array>
#include <limits>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "data/io/atomic_file.h"
#include "data/io/files.h"
#include "data/io/fingerprint.h"
#include "data/utf8.h"

namespace tinylm {
namespace fs = std::filesystem;

namespace {

constexpr const char* kPreTokenizer =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// GPT-2's byte -> printable character: the printable Latin-1 bytes stand for themselves,
// the other 68 are moved to U+0100 onwards in byte order (UTF-8 encoded here).
const std::array<std::string, 256>& byte_to_text() {
  static const std::array<std::string, 256> table = [] {
    std::array<std::string, 256> t;
    int moved = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      append_utf8(t[static_cast<size_t>(b)], static_cast<char32_t>(printable ? b : 256 + moved++));
    }
    return t;
  }();
  return table;
}

const std::unordered_map<char32_t, unsigned char>& text_to_byte() {
  static const std::unordered_map<char32_t, unsigned char> table = [] {
    std::unordered_map<char32_t, unsigned char> t;
    for (int b = 0; b < 256; ++b)
      t[decode_utf8(byte_to_text()[static_cast<size_t>(b)], "the byte map").front()] =
          static_cast<unsigned char>(b);
    return t;
  }();
  return table;
}

}  // namespace

struct Gpt2Tokenizer::Regex {
  pcre2_code* code = nullptr;   // the pre-tokenizer
  pcre2_code* space = nullptr;  // one character of \s, the pre-tokenizer's own white space
  ~Regex() {
    pcre2_code_free(code);
    pcre2_code_free(space);
  }
};

Gpt2Tokenizer::~Gpt2Tokenizer() = default;

Gpt2Tokenizer::Gpt2Tokenizer(std::unordered_map<std::string, int64_t> ids,
                             std::vector<std::string> merges)
    : ids_(std::move(ids)), merges_(std::move(merges)), regex_(std::make_unique<Regex>()) {
  tokens_.resize(ids_.size());
  for (const auto& [token, id] : ids_) tokens_[static_cast<size_t>(id)] = token;
  for (size_t r = 0; r < merges_.size(); ++r) ranks_.emplace(merges_[r], static_cast<int64_t>(r));
  const auto compile = [](const char* pattern, uint32_t options) {
    int error = 0;
    PCRE2_SIZE offset = 0;
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern), PCRE2_ZERO_TERMINATED,
                                     PCRE2_UTF | PCRE2_UCP | options, &error, &offset, nullptr);
    if (!code) throw std::logic_error(std::string("regex ") + pattern + " does not compile");
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // faster where PCRE2 has a JIT
    return code;
  };
  regex_->code = compile(kPreTokenizer, 0);
  regex_->space = compile(R"(\s)", PCRE2_ANCHORED);
}

std::unique_ptr<Gpt2Tokenizer> Gpt2Tokenizer::from_files(const fs::path& vocab_json,
                                                         const fs::path& merges_txt) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(read_file(vocab_json));
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(vocab_json.string() + " is not valid JSON: " + e.what());
  }
  if (!doc.is_object() || doc.empty())
    throw std::runtime_error(vocab_json.string() + " is not a JSON object of token -> id");
  std::unordered_map<std::string, int64_t> ids;
  std::vector<bool> seen(doc.size(), false);
  for (const auto& [token, id] : doc.items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
        id.get<int64_t>() >= static_cast<int64_t>(doc.size()) || seen[id.get<size_t>()]) {
      throw std::runtime_error(vocab_json.string() + ": \"" + token +
                               "\" has an id that is not one of 0 .. " +
                               std::to_string(doc.size() - 1) + " once each");
    }
    seen[id.get<size_t>()] = true;
    ids.emplace(token, id.get<int64_t>());
  }
  for (const std::string& b : byte_to_text()) {
    if (!ids.count(b))
      throw std::runtime_error(vocab_json.string() + " lacks the byte token \"" + b +
                               "\": not a byte-level BPE vocabulary");
  }
  std::vector<std::string> merges;
  const std::string text = read_file(merges_txt);
  size_t line_no = 0;
  for (size_t at = 0; at < text.size();) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(at, end - at);
    at = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || (line_no == 1 && line.rfind("#version", 0) == 0)) continue;
    const size_t space = line.find(' ');
    if (space == std::string::npos || space == 0 || space + 1 == line.size() ||
        line.find(' ', space + 1) != std::string::npos ||
        !ids.count(line.substr(0, space) + line.substr(space + 1))) {
      throw std::runtime_error(merges_txt.string() + ":" + std::to_string(line_no) + ": \"" + line +
                               "\" is not two tokens whose join is in the vocabulary");
    }
    merges.push_back(line);
  }
  return std::unique_ptr<Gpt2Tokenizer>(new Gpt2Tokenizer(std::move(ids), std::move(merges)));
}

std::vector<int64_t> Gpt2Tokenizer::encode_piece(const std::string& bytes) const {
  // The piece as symbols, one per byte-mapped character; then the lowest-ranked adjacent
  // pair is merged, every occurrence left to right, until no adjacent pair has a rank.
  std::vector<std::string> symbols;
  for (const unsigned char b : bytes) symbols.push_back(byte_to_text()[b]);
  while (symbols.size() > 1) {
    int64_t best = std::numeric_limits<int64_t>::max();
    std::string best_pair;
    for (size_t i = 0; i + 1 < symbols.size(); ++i) {
      const auto it = ranks_.find(symbols[i] + " " + symbols[i + 1]);
      if (it != ranks_.end() && it->second < best) {
        best = it->second;
        best_pair = it->first;
      }
    }
    if (best_pair.empty()) break;
    const size_t space = best_pair.find(' ');
    const std::string first = best_pair.substr(0, space), second = best_pair.substr(space + 1);
    std::vector<std::string> merged;
    for (size_t i = 0; i < symbols.size(); ++i) {
      if (i + 1 < symbols.size() && symbols[i] == first && symbols[i + 1] == second) {
        merged.push_back(first + second);
        ++i;
      } else {
        merged.push_back(symbols[i]);
      }
    }
    symbols = std::move(merged);
  }
  std::vector<int64_t> out;
  for (const std::string& s : symbols) out.push_back(ids_.at(s));  // bytes and merges exist
  return out;
}

std::vector<int64_t> Gpt2Tokenizer::encode(std::string_view text, std::string_view source) const {
  if (const size_t bad = find_invalid_utf8(text); bad != std::string_view::npos) {
    throw std::invalid_argument(std::string(source) + " is not valid UTF-8 at byte " +
                                std::to_string(bad));
  }
  std::vector<int64_t> out;
  pcre2_match_data* match = pcre2_match_data_create_from_pattern(regex_->code, nullptr);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  for (PCRE2_SIZE at = 0; at < text.size();) {
    // Validated above: without PCRE2_NO_UTF_CHECK every call would check the whole text again.
    const int found =
        pcre2_match(regex_->code, subject, text.size(), at, PCRE2_NO_UTF_CHECK, match, nullptr);
    if (found < 0) break;  // nothing left that a piece matches (the regex covers every char)
    const PCRE2_SIZE* span = pcre2_get_ovector_pointer(match);
    const std::vector<int64_t> ids =
        encode_piece(std::string(text.substr(span[0], span[1] - span[0])));
    out.insert(out.end(), ids.begin(), ids.end());
    at = span[1] > at ? span[1] : at + 1;
  }
  pcre2_match_data_free(match);
  return out;
}

std::optional<int64_t> Gpt2Tokenizer::bos_id() const {
  const auto it = ids_.find("<|endoftext|>");
  if (it == ids_.end()) return std::nullopt;
  return it->second;
}

size_t Gpt2Tokenizer::cut_point(std::string_view text) const {
  // Before the run of white space that holds the last '\n'. A pre-token never joins a
  // character that is not white space to one that is after it, so the regex meets the same
  // start there whether the text is whole or cut. Just after the '\n' would not do:
  // \s+(?!\S) splits "\n\nA" as "\n", "\n", "A" but a chunk ending "\n\n" as one piece.
  const size_t newline = text.rfind('\n');
  if (newline == std::string_view::npos) return newline;
  pcre2_match_data* match = pcre2_match_data_create_from_pattern(regex_->space, nullptr);
  size_t cut = newline;
  while (cut > 0) {
    size_t start = cut - 1;  // the character before the cut
    while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
    // Only that character is matched (and checked as UTF-8: a bad one is not white space).
    const int found = pcre2_match(regex_->space, reinterpret_cast<PCRE2_SPTR>(text.data() + start),
                                  cut - start, 0, 0, match, nullptr);
    if (found < 0) break;
    cut = start;
  }
  pcre2_match_data_free(match);
  return cut == 0 ? std::string_view::npos : cut;
}

std::string Gpt2Tokenizer::token_bytes(int64_t id) const {
  check_id(id);
  std::string out;
  for (const char32_t c : decode_utf8(tokens_[static_cast<size_t>(id)], "the vocabulary")) {
    const auto it = text_to_byte().find(c);
    if (it != text_to_byte().end()) out += static_cast<char>(it->second);
  }
  return out;
}

std::string Gpt2Tokenizer::decode(const std::vector<int64_t>& ids) const {
  std::string out;
  for (const int64_t id : ids) out += token_bytes(id);
  return out;
}

void Gpt2Tokenizer::save(const fs::path& dir) const {
  nlohmann::json vocab = nlohmann::json::object();
  for (size_t id = 0; id < tokens_.size(); ++id) vocab[tokens_[id]] = id;
  std::string merges = "#version: 0.2\n";
  for (const std::string& m : merges_) merges += m + "\n";
  write_file_atomic(dir / "vocab.json", vocab.dump() + "\n");
  write_file_atomic(dir / "merges.txt", merges);
  write_file_atomic(dir / "tokenizer.json", nlohmann::json{{"type", kind_name()},
                                                           {"vocab", "vocab.json"},
                                                           {"merges", "merges.txt"},
                                                           {"fingerprint", to_hex(fingerprint())}}
                                                    .dump() +
                                                "\n");
}

uint64_t Gpt2Tokenizer::fingerprint() const {
  Fingerprint f;
  f.add_field("gpt2");
  for (const std::string& t : tokens_) f.add_field(t);
  for (const std::string& m : merges_) f.add_field(m);
  return f.value();
}

std::string Gpt2Tokenizer::describe() const {
  return "gpt2 byte-level BPE, " + std::to_string(tokens_.size()) + " tokens, " +
         std::to_string(merges_.size()) + " merges";
}

}  // namespace tinylm
