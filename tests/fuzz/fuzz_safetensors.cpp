// safetensors files: the header's JSON, offsets, shapes, dtypes and checksums.
#include "tests/fuzz/fuzz_support.h"
#include "train/run/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return tinylm::fuzz::run(data, size, [](const std::string& bytes) {
    tinylm::decode_safetensors(bytes, "fuzz.safetensors");
  });
}
