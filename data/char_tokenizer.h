#pragma once
// Character-level tokenizer over Unicode code points. The vocabulary is the sorted set of
// code points of a text (as nanoGPT builds it, so ids agree for the same corpus). A code
// point outside the vocabulary is an error naming it and its position; there is no
// "unknown" token. Serialised as tokenizer.json: {"type": "char", "vocab": ["\n", " ", ...]}.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "data/tokenizer.h"

namespace tinylm {

class CharTokenizer : public Tokenizer {
 public:
  // The vocabulary must be non-empty, strictly increasing, and valid code points.
  explicit CharTokenizer(std::vector<char32_t> vocab);

  // Builds the vocabulary from every code point in `text` (valid UTF-8 required).
  static CharTokenizer from_text(std::string_view text);

  // Parses and validates a tokenizer.json document; `source` names it in errors.
  static CharTokenizer from_json(const nlohmann::json& doc, std::string_view source);
  nlohmann::json to_json() const;

  TokenizerKind kind() const override { return TokenizerKind::kChar; }
  int64_t vocab_size() const override { return static_cast<int64_t>(vocab_.size()); }
  const std::vector<char32_t>& vocab() const { return vocab_; }

  std::vector<int64_t> encode(std::string_view text,
                              std::string_view source = "the text") const override;
  std::string decode(const std::vector<int64_t>& ids) const override;
  std::string token_bytes(int64_t id) const override;
  void save(const std::filesystem::path& dir) const override;
  uint64_t fingerprint() const override;
  std::string describe() const override;

 private:
  std::vector<char32_t> vocab_;
  std::vector<int32_t> id_of_;  // dense code point -> id table, -1 where absent
};

}  // namespace tinylm
