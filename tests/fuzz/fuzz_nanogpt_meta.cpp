// Pickles: nanoGPT's meta.pkl, through the pickle rewriter and LibTorch's unpickler.
#include "tests/fuzz/fuzz_support.h"
#include "train/formats/nanogpt_checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return tinylm::fuzz::run(data, size, [](const std::string& bytes) {
    const auto path = tinylm::fuzz::scratch_dir() / "meta.pkl";
    tinylm::fuzz::write_file(path, bytes);
    tinylm::read_nanogpt_meta(path);
  });
}
