#pragma once
// SentencePiece (BPE or unigram) behind the Tokenizer interface: loaded from the bytes of a
// .model file, or trained here on the corpus. The library itself lives in
// libtinylm_sentencepiece.so, loaded on first use with dlopen(RTLD_DEEPBIND) so that its
// protobuf never meets LibTorch's (see sentencepiece_api.h); this file is the only one that
// knows. Models tinylm trains keep text exactly (identity normalisation, no dummy prefix, no
// whitespace folding, byte fallback by default), so decode(encode(text)) == text, and no
// piece spans a line end, so a corpus can be encoded line by line.

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "data/tokenizer.h"

namespace tinylm {

class SentencePieceTokenizer : public Tokenizer {
 public:
  // `source` names the model in errors: a path, "the trained model".
  static std::unique_ptr<SentencePieceTokenizer> from_bytes(std::string model, std::string source);
  static std::unique_ptr<SentencePieceTokenizer> from_file(const std::filesystem::path& path);
  ~SentencePieceTokenizer() override;

  TokenizerKind kind() const override { return TokenizerKind::kSentencePiece; }
  int64_t vocab_size() const override { return vocab_size_; }
  std::vector<int64_t> encode(std::string_view text,
                              std::string_view source = "the text") const override;
  std::string decode(const std::vector<int64_t>& ids) const override;
  std::string token_bytes(int64_t id) const override;
  void save(const std::filesystem::path& dir) const override;
  uint64_t fingerprint() const override;
  std::string describe() const override;
  std::optional<int64_t> bos_id() const override { return bos_id_; }

  const std::string& model_bytes() const { return model_; }
  // The piece as SentencePiece writes it ("▁the", "<0x0A>").
  std::string piece(int64_t id) const;
  // Its score (SentencePiece's GetScore), what llama2.c's tokenizer.bin stores beside it.
  float score(int64_t id) const;

 private:
  struct Handle;
  SentencePieceTokenizer(std::string model, std::unique_ptr<Handle> handle);
  std::string model_;
  std::unique_ptr<Handle> handle_;
  int64_t vocab_size_ = 0;
  std::vector<std::string> bytes_of_;  // token_bytes by id
  std::optional<int64_t> bos_id_;      // the control piece <s>, when the model has one
};

struct SentencePieceTraining {
  std::string model_type = "bpe";  // bpe | unigram
  int64_t vocab_size = 1024;
  double character_coverage = 1.0;
  bool byte_fallback = true;
  std::vector<std::string> user_defined_symbols;  // kept whole, e.g. "<|endoftext|>"
  int64_t max_sentences = 2000000;                // a random sample of this many lines trains it
  int threads = 1;
};

// Trains a model on the lines `next_line` yields (each with its '\n'; false at the end).
// `corpus` names the text in errors; SentencePiece's own complaints (a vocabulary larger than
// the text supports) are passed on in words that say which setting to change.
std::unique_ptr<SentencePieceTokenizer> train_sentencepiece(
    const SentencePieceTraining& options, const std::function<bool(std::string& line)>& next_line,
    const std::string& corpus);

}  // namespace tinylm
