// tokenizer.json: char and byte vocabularies, and what it says the other kinds need.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

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
    // What loaded must round-trip: each of its first ids (every one of a byte tokenizer)
    // decodes to a text that encodes back to that id alone, and all of them together to the
    // same ids in order. A vocabulary that cannot (a duplicate, a piece that is not one
    // character) had to be refused at load; passing here is a finding.
    std::vector<int64_t> ids;
    for (int64_t id = 0; id < std::min<int64_t>(tokenizer->vocab_size(), 300); ++id) {
      ids.push_back(id);
      if (tokenizer->encode(tokenizer->decode({id})) != std::vector<int64_t>{id}) {
        std::fprintf(stderr, "id %lld does not round-trip\n", static_cast<long long>(id));
        std::abort();
      }
    }
    if (tokenizer->encode(tokenizer->decode(ids)) != ids) {
      std::fprintf(stderr, "the first %zu ids do not round-trip together\n", ids.size());
      std::abort();
    }
  });
}
