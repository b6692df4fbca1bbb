// state.json: the training state, its manifest and its own checksum.
#include "tests/fuzz/fuzz_support.h"
#include "train/run/checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return tinylm::fuzz::run(data, size, [](const std::string& bytes) {
    const auto& dir = tinylm::fuzz::scratch_dir();
    tinylm::fuzz::write_file(dir / "state.json", bytes);
    tinylm::load_training_state(dir);
  });
}
