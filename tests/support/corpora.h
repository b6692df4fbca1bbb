#pragma once
// The shipped corpora the tokenizer tests run on, and a SentencePiece model trained on a
// text in the way tinylm trains one (line by line, byte fallback).

#include <algorithm>
#include <functional>
#include <memory>
#include <string>

#include "data/sentencepiece_tokenizer.h"

namespace tinylm::test {

inline const char* const kCorpora[] = {"tinyshakespeare.txt", "botchan.txt",
                                       "wagahaiwa_nekodearu.txt", "tinystories_sample.txt"};

// Lines of `text` (each with its '\n') for SentencePiece's trainer, at most `limit` bytes.
inline std::function<bool(std::string&)> training_lines(const std::string& text, size_t limit) {
  auto at = std::make_shared<size_t>(0);
  return [&text, at, limit](std::string& line) {
    if (*at >= std::min(text.size(), limit)) return false;
    const size_t newline = text.find('\n', *at);
    const size_t end = newline == std::string::npos ? text.size() : newline + 1;
    line = text.substr(*at, end - *at);
    *at = end;
    return true;
  };
}

// `type` bpe or unigram, `vocab` pieces, `<|endoftext|>` kept whole.
inline std::unique_ptr<SentencePieceTokenizer> trained(const std::string& text,
                                                       const std::string& type, int64_t vocab,
                                                       size_t limit = 300000) {
  SentencePieceTraining options;
  options.model_type = type;
  options.vocab_size = vocab;
  options.character_coverage = 0.995;  // the Japanese novel's rare characters become bytes
  options.user_defined_symbols = {"<|endoftext|>"};
  return train_sentencepiece(options, training_lines(text, limit), "the test text");
}

}  // namespace tinylm::test
