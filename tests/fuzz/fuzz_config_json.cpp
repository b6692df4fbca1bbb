// config.json: the model's shape, as load_run reads it.
#include <nlohmann/json.hpp>

#include "tests/fuzz/fuzz_support.h"
#include "train/run/checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return tinylm::fuzz::run(data, size, [](const std::string& bytes) {
    // As read_json: bytes that are not JSON are refused before the model config sees them.
    const auto doc = nlohmann::json::parse(bytes, nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded()) return;
    tinylm::model_config_from_json(doc, "config.json");
  });
}
