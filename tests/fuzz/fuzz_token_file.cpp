// Token files (.bin, "TLMTOKEN"): header, width, count against the file's size.
#include "data/token_file.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return tinylm::fuzz::run(data, size, [](const std::string& bytes) {
    const auto path = tinylm::fuzz::scratch_dir() / "tokens.bin";
    tinylm::fuzz::write_file(path, bytes);
    const tinylm::TokenFile file = tinylm::open_token_file(path);
    // Every token the header promises can be read.
    const int64_t n = file.tokens.size();
    if (n > 0) file.tokens.slice(n - 1, n).to_tensor();
  });
}
