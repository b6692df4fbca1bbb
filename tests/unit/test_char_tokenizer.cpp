// The character tokenizer: nanoGPT's ids, a round trip, and an unknown character named
// with its position.

#include <gtest/gtest.h>

#include <random>

#include <nlohmann/json.hpp>

#include "data/char_tokenizer.h"
#include "data/corpus.h"
#include "data/utf8.h"
#include "test_util.h"

namespace tinylm {
namespace {

using test::error_of;

TEST(CharTokenizer, VocabularyIsTheSortedCharacterSet) {
  const CharTokenizer tok = CharTokenizer::from_text(read_corpus(test::shakespeare()));
  EXPECT_EQ(tok.vocab_size(), 65);
  EXPECT_EQ(tok.decode({0, 1, 2}), "\n !");  // as nanoGPT's stoi orders them
  EXPECT_EQ(tok.encode("First"), (std::vector<int64_t>{18, 47, 56, 57, 58}));
}

TEST(CharTokenizer, RoundTripsEveryCorpus) {
  for (const char* name : {"tinyshakespeare.txt", "botchan.txt", "wagahaiwa_nekodearu.txt",
                           "tinystories_sample.txt"}) {
    const auto file = test::corpora() / name;
    const std::string text = read_corpus(file);
    const CharTokenizer tok = CharTokenizer::from_text(text);
    EXPECT_EQ(tok.decode(tok.encode(text)), text) << file;
  }
}

TEST(CharTokenizer, RoundTripsAnyTextOfItsVocabulary) {
  // Random strings over a vocabulary of 1-, 2-, 3- and 4-byte characters and control codes.
  const std::u32string alphabet = U"\n\r\t a\u00e9\u00df\u20ac\u732b\u3042\U0001F600\U0010FFFF";
  std::string vocab_text;
  for (char32_t cp : alphabet) append_utf8(vocab_text, cp);
  const CharTokenizer tok = CharTokenizer::from_text(vocab_text);
  ASSERT_EQ(tok.vocab_size(), static_cast<int64_t>(alphabet.size()));
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::string text;
    std::vector<int64_t> ids;
    const size_t length = rng() % 50;
    for (size_t i = 0; i < length; ++i) {
      const size_t pick = rng() % alphabet.size();
      append_utf8(text, alphabet[pick]);
      ids.push_back(static_cast<int64_t>(
          std::lower_bound(tok.vocab().begin(), tok.vocab().end(), alphabet[pick]) -
          tok.vocab().begin()));
    }
    EXPECT_EQ(tok.encode(text), ids);
    EXPECT_EQ(tok.decode(ids), text);
  }
}

TEST(CharTokenizer, UnknownCharacterNamesItAndItsPosition) {
  const CharTokenizer tok = CharTokenizer::from_text("abc\n");
  const std::string e = error_of([&] { tok.encode("ab\ncaZ", "the prompt"); });
  EXPECT_NE(e.find("'Z' (U+005A) at position 5 (line 2, column 3) of the prompt"),
            std::string::npos)
      << e;
}

TEST(CharTokenizer, JsonRoundTripAndValidation) {
  const CharTokenizer tok = CharTokenizer::from_text("h\xC3\xA9llo\n");
  const CharTokenizer back = CharTokenizer::from_json(tok.to_json(), "t.json");
  EXPECT_EQ(back.vocab(), tok.vocab());
  using nlohmann::json;
  EXPECT_THROW(CharTokenizer::from_json(json{{"type", "bpe"}, {"vocab", {"a"}}}, "t"),
               std::runtime_error);
  EXPECT_THROW(CharTokenizer::from_json(json{{"type", "char"}, {"vocab", {"b", "a"}}}, "t"),
               std::runtime_error);
  EXPECT_THROW(CharTokenizer::from_json(json{{"type", "char"}, {"vocab", {"ab"}}}, "t"),
               std::runtime_error);
  EXPECT_THROW(CharTokenizer::from_json(json{{"type", "char"}, {"vocab", json::array()}}, "t"),
               std::runtime_error);
  EXPECT_THROW(CharTokenizer::from_json(json{{"type", "char"}}, "t"), std::runtime_error);
  EXPECT_THROW(tok.decode({99}), std::runtime_error);
}

}  // namespace
}  // namespace tinylm
