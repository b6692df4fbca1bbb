// TOML configs (configs/*.toml, a run's config.toml): syntax, keys, types, ranges.
#include <cmath>
#include <cstdlib>

#include "tests/fuzz/fuzz_support.h"
#include "train/run/run_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return tinylm::fuzz::run(data, size, [](const std::string& bytes) {
    const auto path = tinylm::fuzz::scratch_dir() / "config.toml";
    tinylm::fuzz::write_file(path, bytes);
    const tinylm::RunConfig config = tinylm::load_run_config(path);
    tinylm::to_toml(config);                      // what loaded can be written back
    for (const auto& key : tinylm::run_keys()) {  // and holds only finite numbers
      const tinylm::ConfigValue value = key.get(config);
      if (const double* d = std::get_if<double>(&value); d && !std::isfinite(*d)) std::abort();
    }
  });
}
