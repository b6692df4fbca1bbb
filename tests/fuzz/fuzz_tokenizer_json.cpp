// tokenizer.json: char and byte vocabularies, and what it says the other kinds need.
#include "data/tokenizer.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return tinylm::fuzz::run(data, size, [](const std::string& bytes) {
    // A SentencePiece model cannot load in a LibTorch process under ASan (docs/DESIGN.md,
    // "Sanitizers and fuzzing"); fuzz_sentencepiece covers it in a process of its own.
    if (bytes.find("sentencepiece") != std::string::npos) return;
    const auto& dir = tinylm::fuzz::scratch_dir();
    tinylm::fuzz::write_file(dir / "tokenizer.json", bytes);
    const auto tokenizer = tinylm::load_tokenizer(dir);
    // What loaded must work: a round trip of what it can encode.
    if (tokenizer->vocab_size() > 0) {
      tokenizer->decode(tokenizer->encode(tokenizer->decode({tokenizer->vocab_size() - 1})));
    }
  });
}
