#pragma once
// A synthetic corpus where the answer is known: sequences of random symbols in which a
// segment repeats at a distance that varies, so that only a mechanism that looks up what
// followed an earlier occurrence (an induction head) predicts the repeat; a head that reads
// a fixed offset back cannot. Each sequence is a random prefix of 0-24 symbols, a random
// segment of 2-32 symbols, then the same segment again; sequences follow one another with
// no separator. Segments as short as 2 are there so that the canonical circuit (a head that
// reads the previous token, then one that attends to the token after the earlier copy) pays
// more than its shifted variants: with segments of 8-32, trained models stalled or found a
// head that reads 13 tokens back instead of 1 (docs/INSPECT.md, "A task where the answer is
// known"). The 64 symbols are the base64 alphabet, so the char tokenizer gives a vocabulary of
// exactly 64. Deterministic for a seed, on every platform.

#include <cstdint>
#include <string>

namespace tinylm {

inline constexpr char kInductionAlphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

inline constexpr int kInductionPrefixMax = 24;
inline constexpr int kInductionSegmentMin = 2;
inline constexpr int kInductionSegmentMax = 32;

// At least `chars` characters (whole sequences), from `seed`.
std::string induction_corpus(int64_t chars, uint64_t seed);

}  // namespace tinylm
