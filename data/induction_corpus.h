#pragma once
// A synthetic corpus where the answer is known: sequences of random symbols in which a
// segment repeats at a distance that varies, so that only a mechanism that looks up what
// followed an earlier occurrence (an induction head) predicts the repeat; a head that reads
// a fixed offset back cannot. Each sequence is a random prefix of 0-24 symbols, a random
// segment of 8-32 symbols, then the same segment again; sequences follow one another with
// no separator. The 64 symbols are the base64 alphabet, so the char tokenizer gives a
// vocabulary of exactly 64. Deterministic for a seed, on every platform.

#include <cstdint>
#include <string>

namespace tinylm {

inline constexpr char kInductionAlphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

// At least `chars` characters (whole sequences), from `seed`.
std::string induction_corpus(int64_t chars, uint64_t seed);

}  // namespace tinylm
