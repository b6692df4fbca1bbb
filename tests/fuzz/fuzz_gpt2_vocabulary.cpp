// GPT-2's vocabulary: vocab.json and merges.txt (the input is both, split at its first NUL).
#include "data/gpt2_tokenizer.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return tinylm::fuzz::run(data, size, [](const std::string& bytes) {
    const auto& dir = tinylm::fuzz::scratch_dir();
    const size_t split = std::min(bytes.find('\0'), bytes.size());
    tinylm::fuzz::write_file(dir / "vocab.json", bytes.substr(0, split));
    tinylm::fuzz::write_file(dir / "merges.txt", bytes.substr(std::min(split + 1, bytes.size())));
    const auto tokenizer =
        tinylm::Gpt2Tokenizer::from_files(dir / "vocab.json", dir / "merges.txt");
    tokenizer->decode(tokenizer->encode("Hello, world!\n\n  it's 2026"));
  });
}
