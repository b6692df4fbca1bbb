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

TEST(InductionCorpus, FollowsItsShape) {
  InductionShape shape;
  shape.prefix_max = 0;
  shape.repeat_min = 3;
  shape.repeat_max = 3;
  shape.symbols = 4;
  const std::string text = induction_corpus(6000, 7, shape);
  ASSERT_EQ(text.size() % 6, 0u);  // whole sequences of a segment of 3 and its repeat
  for (size_t at = 0; at < text.size(); at += 6)
    ASSERT_EQ(text.substr(at, 3), text.substr(at + 3, 3)) << "the sequence at " << at;
  EXPECT_EQ(text.find_first_not_of("ABCD"), std::string::npos);
  EXPECT_EQ(CharTokenizer::from_text(text).vocab_size(), 4);
  // The default shape is the documented one, so a config that names none keeps its corpus.
  EXPECT_EQ(induction_corpus(1000, 1337, InductionShape{}), induction_corpus(1000, 1337));
}

TEST(InductionCorpus, NamesTheFieldOutOfRange) {
  const auto error = [](InductionShape shape) {
    try {
      induction_corpus(100, 1, shape);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  InductionShape shape;
  shape.repeat_min = 5;
  shape.repeat_max = 4;
  EXPECT_NE(error(shape).find("repeat_max (4) must be >= repeat_min (5)"), std::string::npos);
  shape = {};
  shape.symbols = 65;
  EXPECT_NE(error(shape).find("symbols must be in [2, 64] (got 65)"), std::string::npos);
  shape = {};
  shape.prefix_max = -1;
  EXPECT_NE(error(shape).find("prefix_max must be >= 0"), std::string::npos);
}

}  // namespace
}  // namespace tinylm
