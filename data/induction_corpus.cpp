#include "data/induction_corpus.h"

#include <random>
#include <stdexcept>

namespace tinylm {

void InductionShape::validate() const {
  const auto require = [](bool ok, const std::string& what) {
    if (!ok) throw std::invalid_argument("the induction corpus: " + what);
  };
  require(prefix_max >= 0, "prefix_max must be >= 0 (got " + std::to_string(prefix_max) + ")");
  require(repeat_min >= 1, "repeat_min must be >= 1 (got " + std::to_string(repeat_min) + ")");
  require(repeat_max >= repeat_min, "repeat_max (" + std::to_string(repeat_max) +
                                        ") must be >= repeat_min (" +
                                        std::to_string(repeat_min) + ")");
  require(symbols >= 2 && symbols <= kInductionAlphabetSize,
          "symbols must be in [2, 64] (got " + std::to_string(symbols) + ")");
}

std::string induction_corpus(int64_t chars, uint64_t seed, const InductionShape& shape) {
  if (chars < 1) throw std::invalid_argument("the induction corpus needs a size >= 1");
  shape.validate();
  // mt19937_64 is the same everywhere; the distributions of <random> are not, so ranges are
  // drawn by modulo (the bias is below 1e-17 for ranges this small).
  std::mt19937_64 rng(seed);
  const auto uniform = [&](uint64_t lo, uint64_t hi) { return lo + rng() % (hi - lo + 1); };
  const auto symbol = [&] {
    return kInductionAlphabet[uniform(0, static_cast<uint64_t>(shape.symbols) - 1)];
  };
  std::string text;
  text.reserve(static_cast<size_t>(chars) + 100);
  std::string segment;
  while (static_cast<int64_t>(text.size()) < chars) {
    for (uint64_t n = uniform(0, static_cast<uint64_t>(shape.prefix_max)); n > 0; --n)
      text += symbol();
    segment.clear();
    for (uint64_t n = uniform(static_cast<uint64_t>(shape.repeat_min),
                              static_cast<uint64_t>(shape.repeat_max));
         n > 0; --n)
      segment += symbol();
    text += segment;
    text += segment;
  }
  return text;
}

}  // namespace tinylm
