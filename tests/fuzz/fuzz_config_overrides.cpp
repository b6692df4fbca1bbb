// The command line's config overrides (--section.key=value, one per line of the input) and
// the numeric flags' text check (check_number_text, which every numeric flag goes through).
// Refusing is right (std::invalid_argument, a usage error); what is accepted must hold: every
// key in range, every number finite, the TOML written back reading back the same. A broken
// promise aborts, and libFuzzer reports it.
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "tests/fuzz/fuzz_support.h"
#include "train/run/run_config.h"

namespace {

void require(bool ok) {
  if (!ok) std::abort();
}

void check_flags(const std::string& text) {
  using tinylm::between;
  // Whatever a flag's check accepts is a number of its kind, in its range.
  if (tinylm::check_number_text(between(0, 1, "(]"), text, false).empty()) {
    const double d = std::strtod(text.c_str(), nullptr);
    require(std::isfinite(d) && d > 0 && d <= 1);
  }
  if (tinylm::check_number_text(tinylm::at_least(1), text, true).empty()) {
    require(!text.empty() && text.find_first_not_of("0123456789") == std::string::npos);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return tinylm::fuzz::run(data, size, [](const std::string& bytes) {
    std::vector<std::string> overrides;
    std::istringstream lines(bytes);
    for (std::string line; std::getline(lines, line);) {
      check_flags(line);
      overrides.push_back(line);
    }
    tinylm::RunConfig config;
    config.data.path = (tinylm::fuzz::scratch_dir() / "corpus.txt").string();
    config.data.cache_dir = (tinylm::fuzz::scratch_dir() / "cache").string();
    try {
      tinylm::apply_overrides(config, overrides);
    } catch (const std::invalid_argument&) {
      return;  // a usage error, named
    }
    for (const auto& key : tinylm::run_keys()) {
      const tinylm::ConfigValue value = key.get(config);
      if (const double* d = std::get_if<double>(&value)) require(std::isfinite(*d));
      require(key.accepts.accepts(value));
    }
    // What validated is written as a run's config.toml and reads back: a file that loads, and
    // whose values (relative paths resolved once) are what it wrote.
    const auto round_trip = [](const tinylm::RunConfig& c) {
      const auto path = tinylm::fuzz::scratch_dir() / "resolved.toml";
      tinylm::fuzz::write_file(path, tinylm::to_toml(c));
      try {
        return tinylm::load_run_config(path);
      } catch (const std::runtime_error&) {
        std::abort();
      }
    };
    const tinylm::RunConfig once = round_trip(config);
    require(tinylm::to_toml(round_trip(once)) == tinylm::to_toml(once));
  });
}
