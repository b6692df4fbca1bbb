#include "data/induction_corpus.h"

#include <random>
#include <stdexcept>

namespace tinylm {

std::string induction_corpus(int64_t chars, uint64_t seed) {
  if (chars < 1) throw std::invalid_argument("the induction corpus needs a size >= 1");
  // mt19937_64 is the same everywhere; the distributions of <random> are not, so ranges are
  // drawn by modulo (the bias is below 1e-17 for ranges this small).
  std::mt19937_64 rng(seed);
  const auto uniform = [&](uint64_t lo, uint64_t hi) { return lo + rng() % (hi - lo + 1); };
  std::string text;
  text.reserve(static_cast<size_t>(chars) + 100);
  std::string segment;
  while (static_cast<int64_t>(text.size()) < chars) {
    for (uint64_t n = uniform(0, kInductionPrefixMax); n > 0; --n)
      text += kInductionAlphabet[uniform(0, 63)];
    segment.clear();
    for (uint64_t n = uniform(kInductionSegmentMin, kInductionSegmentMax); n > 0; --n)
      segment += kInductionAlphabet[uniform(0, 63)];
    text += segment;
    text += segment;
  }
  return text;
}

}  // namespace tinylm
