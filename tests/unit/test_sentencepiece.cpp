// SentencePiece through our wrapper: ids equal to Debian's spm_encode, a round trip on every
// shipped corpus, and a clear error for every bad model or setting.

#include <gtest/gtest.h>

#include <sstream>

#include "corpora.h"
#include "data/char_tokenizer.h"
#include "data/corpus.h"
#include "data/io/files.h"
#include "data/io/fingerprint.h"
#include "data/sentencepiece_tokenizer.h"
#include "data/utf8.h"
#include "test_util.h"

namespace tinylm {
namespace {

using test::TempDir;

using test::error_of;
using test::trained;
using test::training_lines;

TEST(SentencePiece, IdsAreThoseOfSpmEncode) {
  // Derived once with Debian's sentencepiece 0.1.97:
  //   spm_encode --model=tests/fixtures/sentencepiece_test_model.model --output_format=id
  const auto tok =
      SentencePieceTokenizer::from_file(test::fixtures() / "sentencepiece_test_model.model");
  EXPECT_EQ(tok->vocab_size(), 1000);
  EXPECT_EQ(tok->encode("Hello world."), (std::vector<int64_t>{151, 88, 21, 887, 6}));
  EXPECT_EQ(tok->encode("I saw a girl with a telescope."),
            (std::vector<int64_t>{9, 459, 11, 939, 44, 11, 4, 142, 82, 8, 28, 21, 132, 6}));
  EXPECT_EQ(
      tok->encode("The quick brown fox jumps over the lazy dog, 1234 times!"),
      (std::vector<int64_t>{69, 932, 80,  30,  127, 24, 74, 21, 297, 4,   999, 156, 29,  8, 255,
                            7,  4,   180, 997, 34,  93, 37, 5,  4,   357, 596, 0,   171, 8, 147}));
  EXPECT_EQ(tok->piece(151), "\xE2\x96\x81He");  // "▁He"
  EXPECT_EQ(tok->decode({151, 88, 21, 887, 6}), "Hello world.");
}

TEST(SentencePiece, ScoresAreThoseOfSpmExportVocab) {
  // spm_export_vocab --model=tests/fixtures/sentencepiece_test_model.model, lines 1, 152,
  // 500 and 1000 (ids 0, 151, 499 and 999): what llama2.c's tokenizer.bin stores.
  const auto tok =
      SentencePieceTokenizer::from_file(test::fixtures() / "sentencepiece_test_model.model");
  EXPECT_EQ(tok->score(0), 0.0f);  // <unk>
  // It prints 6 significant digits: the tolerance is its rounding.
  EXPECT_NEAR(tok->score(151), -6.77479, 5e-6);  // ▁He
  EXPECT_NEAR(tok->score(499), -8.14148, 5e-6);  // ▁Ka
  EXPECT_NEAR(tok->score(999), -11.0497, 5e-5);  // j
}

TEST(SentencePiece, EncodingLineByLineEqualsEncodingWhole) {
  // The data pipeline encodes a corpus in chunks cut after a '\n'.
  const std::string text = read_corpus(test::corpora() / "botchan.txt");
  for (const char* type : {"bpe", "unigram"}) {
    const auto tok = trained(text, type, 1000);
    std::vector<int64_t> chunked;
    for (size_t begin = 0; begin < text.size();) {
      size_t end = begin;
      for (int lines = 0; lines < 7 && end < text.size(); ++lines) {
        const size_t newline = text.find('\n', end);
        end = newline == std::string::npos ? text.size() : newline + 1;
      }
      const std::vector<int64_t> part =
          tok->encode(std::string_view(text).substr(begin, end - begin));
      chunked.insert(chunked.end(), part.begin(), part.end());
      begin = end;
    }
    EXPECT_EQ(chunked, tok->encode(text)) << type;
  }
}

TEST(SentencePiece, UserDefinedSymbolIsOneToken) {
  const std::string text = read_corpus(test::corpora() / "tinystories_sample.txt");
  const auto tok = trained(text, "bpe", 300);
  const std::vector<int64_t> ids = tok->encode("<|endoftext|>");
  ASSERT_EQ(ids.size(), 1u);
  EXPECT_EQ(tok->token_bytes(ids[0]), "<|endoftext|>");
}

TEST(SentencePiece, TooLargeAVocabularySaysWhatTheCorpusSupports) {
  const std::string text = read_corpus(test::corpora() / "tinystories_sample.txt");
  const std::string e = error_of([&] { trained(text, "bpe", 8000); });
  EXPECT_NE(e.find("data.vocab_size = 8000 is more than the test text supports"), std::string::npos)
      << e;
  EXPECT_NE(e.find("at most"), std::string::npos) << e;
  EXPECT_NE(e.find("Set [data] vocab_size to"), std::string::npos) << e;
}

TEST(SentencePiece, TooSmallAVocabularyNamesTheCharacters) {
  const std::string text = read_corpus(test::corpora() / "wagahaiwa_nekodearu.txt");
  SentencePieceTraining options;
  options.vocab_size = 300;
  const std::string e =
      error_of([&] { train_sentencepiece(options, training_lines(text, 100000), "the novel"); });
  EXPECT_NE(e.find("data.vocab_size = 300 is too small: the novel has"), std::string::npos) << e;
  EXPECT_NE(e.find("distinct characters"), std::string::npos) << e;
}

TEST(SentencePiece, CorruptedOrForeignModelIsAClearError) {
  TempDir dir;
  const std::string model = read_file(test::fixtures() / "sentencepiece_test_model.model");
  test::write_text(dir / "cut.model", model.substr(0, model.size() / 2));
  std::string e = error_of([&] { SentencePieceTokenizer::from_file(dir / "cut.model"); });
  EXPECT_NE(e.find("cut.model is not a SentencePiece model"), std::string::npos) << e;
  e = error_of([&] { SentencePieceTokenizer::from_file(test::shakespeare()); });
  EXPECT_NE(e.find("tinyshakespeare.txt is not a SentencePiece model"), std::string::npos) << e;
  e = error_of([&] { SentencePieceTokenizer::from_file(dir / "missing.model"); });
  EXPECT_NE(e.find("SentencePiece model not found"), std::string::npos) << e;
}

}  // namespace
}  // namespace tinylm
