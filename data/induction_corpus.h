#pragma once
// A synthetic corpus where the answer is known: sequences of random symbols in which a
// segment repeats at a distance that varies, so that only a mechanism that looks up what
// followed an earlier occurrence (an induction head) predicts the repeat; a head that reads
// a fixed offset back cannot. Each sequence is a random prefix, a random segment, then the
// same segment again; sequences follow one another with no separator. By default the prefix
// has 0-24 symbols and the segment 2-32. Segments as short as 2 are there so that the
// canonical circuit (a head that reads the previous token, then one that attends to the token
// after the earlier copy) pays more than its shifted variants: with segments of 8-32, trained
// models stalled or found a head that reads 13 tokens back instead of 1 (docs/INSPECT.md, "A
// task where the answer is known"). The symbols are the first `symbols` of the base64
// alphabet, so the char tokenizer gives a vocabulary of exactly that many. Deterministic for a
// seed, on every platform.

#include <cstdint>
#include <string>

namespace tinylm {

inline constexpr char kInductionAlphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
inline constexpr int kInductionAlphabetSize = 64;

// The shape of the sequences; lengths are drawn uniformly from the closed ranges.
struct InductionShape {
  int prefix_max = 24;   // symbols before the segment: 0..prefix_max
  int repeat_min = 2;    // the segment's length: repeat_min..repeat_max
  int repeat_max = 32;
  int symbols = kInductionAlphabetSize;  // drawn uniformly from the alphabet's first `symbols`

  // Throws std::invalid_argument naming the field that is out of range.
  void validate() const;
};

// At least `chars` characters (whole sequences), from `seed`.
std::string induction_corpus(int64_t chars, uint64_t seed, const InductionShape& shape = {});

}  // namespace tinylm
