// The generated induction corpus: its sequences repeat a segment after a random prefix.

#include <gtest/gtest.h>

#include "data/char_tokenizer.h"
#include "data/induction_corpus.h"

namespace tinylm {
namespace {

TEST(InductionCorpus, HasTheDocumentedStructureAndIsTheSameEverywhere) {
  const std::string text = induction_corpus(1000, 1337);
  EXPECT_GE(text.size(), 1000u);
  EXPECT_EQ(text.find_first_not_of(kInductionAlphabet), std::string::npos);
  EXPECT_EQ(text, induction_corpus(1000, 1337));
  EXPECT_NE(text, induction_corpus(1000, 1338));
  // The first sequence for this seed: a prefix of 5, a segment of 25, the segment again.
  // Fixed here because the header promises the same corpus on every platform.
  const std::string segment = "bDl+hP8lOJ2wnmBQp8D2/iRMB";
  EXPECT_EQ(text.substr(0, 55), "M6Djd" + segment + segment);
  EXPECT_EQ(CharTokenizer::from_text(induction_corpus(100000, 1)).vocab_size(), 64);
}

}  // namespace
}  // namespace tinylm
