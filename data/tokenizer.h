#pragma once
// Text <-> token ids. Three kinds, chosen by [data] tokenizer: "char" (the code points of the
// corpus), "byte" (256 ids, never an unknown symbol) and "sentencepiece" (BPE or unigram,
// trained by tinylm or loaded from a .model file). A tokenizer travels with its run:
// tokenizer.json names the kind (and holds the vocabulary of a char tokenizer); a
// SentencePiece run adds tokenizer.model; "gpt2" (GPT-2's byte-level BPE, imported with its
// weights) adds vocab.json and merges.txt. Every kind keeps one promise the data pipeline
// relies on: encoding text in pieces split at its cut points gives the same ids as encoding
// it whole, so a corpus can be tokenized in chunks.

#include <array>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tinylm {

// The kinds, named as [data] tokenizer and tokenizer.json's "type" name them: decided here
// only (train/run/run_config.h's key takes these names).
// gpt2: GPT-2's byte-level BPE from a directory's vocab.json and merges.txt.
enum class TokenizerKind { kChar, kByte, kSentencePiece, kGpt2 };
constexpr std::array<const char*, 4> enum_names(TokenizerKind) {
  return {"char", "byte", "sentencepiece", "gpt2"};
}

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  virtual TokenizerKind kind() const = 0;
  std::string kind_name() const { return enum_names(kind())[static_cast<size_t>(kind())]; }
  virtual int64_t vocab_size() const = 0;

  // `source` names the text in errors ("the prompt", a file path).
  virtual std::vector<int64_t> encode(std::string_view text,
                                      std::string_view source = "the text") const = 0;
  virtual std::string decode(const std::vector<int64_t>& ids) const = 0;

  // The bytes `id` adds to the text when tokens are written out one at a time. A byte token
  // may be part of a UTF-8 character, so this is for streaming output, not for labels.
  virtual std::string token_bytes(int64_t id) const = 0;

  // The last offset of `text` where it may be cut, encoding the two parts apart giving the
  // ids of the whole, whatever follows `text`; npos when there is none. By default just
  // after the last '\n' (data/corpus.h's after_last_newline).
  virtual size_t cut_point(std::string_view text) const;

  // The beginning-of-sequence token (SentencePiece's <s>, GPT-2's <|endoftext|>), which
  // llama2.c's run.c and GPT-2's unconditional samples start from; none for char and byte.
  virtual std::optional<int64_t> bos_id() const { return std::nullopt; }

  // How a person reads `id` in a table: valid UTF-8, with stray bytes written as <0xNN>.
  std::string token_label(int64_t id) const;

  // Writes tokenizer.json (and tokenizer.model for SentencePiece) into `dir`, atomically.
  virtual void save(const std::filesystem::path& dir) const = 0;

  // A hash of what defines the tokenizer: equal fingerprints encode alike.
  virtual uint64_t fingerprint() const = 0;

  // One line for logs: "sentencepiece bpe, 1024 pieces".
  virtual std::string describe() const = 0;

 protected:
  // Throws, naming the vocabulary size, when `id` is outside it.
  void check_id(int64_t id) const;
};

// Reads dir/tokenizer.json (and what it refers to); validates before it trusts.
std::unique_ptr<Tokenizer> load_tokenizer(const std::filesystem::path& dir);

// The 256-id byte-level tokenizer.
std::unique_ptr<Tokenizer> make_byte_tokenizer();

}  // namespace tinylm
