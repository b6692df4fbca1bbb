// The three tokenizers: exact round trips on every shipped corpus, SentencePiece ids equal to
// those of Debian's spm_encode, the line-chunking promise the data pipeline relies on, and a
// clear error for every bad model or setting.

#include <gtest/gtest.h>

#include <sstream>

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
const char* const kCorpora[] = {"tinyshakespeare.txt", "botchan.txt", "wagahaiwa_nekodearu.txt",
                                "tinystories_sample.txt"};

// Lines of `text` (each with its '\n') for SentencePiece's trainer, at most `limit` bytes.
std::function<bool(std::string&)> training_lines(const std::string& text, size_t limit) {
  auto at = std::make_shared<size_t>(0);
  return [&text, at, limit](std::string& line) {
    if (*at >= std::min(text.size(), limit)) return false;
    const size_t newline = text.find('\n', *at);
    const size_t end = newline == std::string::npos ? text.size() : newline + 1;
    line = text.substr(*at, end - *at);
    *at = end;
    return true;
  };
}

std::unique_ptr<SentencePieceTokenizer> trained(const std::string& text, const std::string& type,
                                                int64_t vocab, size_t limit = 300000) {
  SentencePieceTraining options;
  options.model_type = type;
  options.vocab_size = vocab;
  options.character_coverage = 0.995;  // the Japanese novel's rare characters become bytes
  options.user_defined_symbols = {"<|endoftext|>"};
  return train_sentencepiece(options, training_lines(text, limit), "the test text");
}

std::string streamed(const Tokenizer& tok, const std::vector<int64_t>& ids) {
  std::string out;
  for (int64_t id : ids) out += tok.token_bytes(id);
  return out;
}

TEST(ByteTokenizer, IsTheBytesThemselves) {
  const auto tok = make_byte_tokenizer();
  EXPECT_EQ(tok->vocab_size(), 256);
  EXPECT_EQ(tok->encode("a\xC3\xA9"), (std::vector<int64_t>{97, 0xC3, 0xA9}));
  const std::string any("\x00\xFF\xC3(", 4);  // not UTF-8: still no unknown symbol
  EXPECT_EQ(tok->decode(tok->encode(any)), any);
  EXPECT_EQ(tok->token_label(0xC3), "<0xC3>");
  EXPECT_EQ(tok->token_label('a'), "a");
  EXPECT_THROW(tok->token_bytes(256), std::runtime_error);
}

TEST(Tokenizers, EveryKindRoundTripsEveryShippedCorpus) {
  for (const char* name : kCorpora) {
    const std::string text = read_corpus(test::corpora() / name);
    const CharTokenizer chars = CharTokenizer::from_text(text);
    EXPECT_EQ(chars.decode(chars.encode(text)), text) << name;
    const auto bytes = make_byte_tokenizer();
    EXPECT_EQ(bytes->decode(bytes->encode(text)), text) << name;
    for (const char* type : {"bpe", "unigram"}) {
      const std::string corpus = name;
      const int64_t vocab = corpus == "tinystories_sample.txt" ? 300 : corpus == "wagahaiwa_nekodearu.txt" ? 3000 : 1000;
      const auto spm = trained(text, type, vocab);
      const std::vector<int64_t> ids = spm->encode(text);
      EXPECT_EQ(spm->decode(ids), text) << name << " " << type;
      // Written out token by token (as `sample` streams), the bytes are the text too.
      EXPECT_EQ(streamed(*spm, ids), text) << name << " " << type;
      EXPECT_LT(ids.size(), text.size()) << name << " " << type;  // it does compress
    }
  }
}

TEST(SentencePiece, IdsAreThoseOfSpmEncode) {
  // Derived once with Debian's sentencepiece 0.1.97:
  //   spm_encode --model=tests/fixtures/sentencepiece_test_model.model --output_format=id
  const auto tok = SentencePieceTokenizer::from_file(test::fixtures() / "sentencepiece_test_model.model");
  EXPECT_EQ(tok->vocab_size(), 1000);
  EXPECT_EQ(tok->encode("Hello world."), (std::vector<int64_t>{151, 88, 21, 887, 6}));
  EXPECT_EQ(tok->encode("I saw a girl with a telescope."),
            (std::vector<int64_t>{9, 459, 11, 939, 44, 11, 4, 142, 82, 8, 28, 21, 132, 6}));
  EXPECT_EQ(tok->encode("The quick brown fox jumps over the lazy dog, 1234 times!"),
            (std::vector<int64_t>{69, 932, 80, 30, 127, 24, 74, 21, 297, 4, 999, 156, 29, 8, 255,
                                  7, 4, 180, 997, 34, 93, 37, 5, 4, 357, 596, 0, 171, 8, 147}));
  EXPECT_EQ(tok->piece(151), "\xE2\x96\x81He");  // "▁He"
  EXPECT_EQ(tok->decode({151, 88, 21, 887, 6}), "Hello world.");
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
      const std::vector<int64_t> part = tok->encode(std::string_view(text).substr(begin, end - begin));
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
  EXPECT_NE(e.find("data.vocab_size = 8000 is more than the test text supports"), std::string::npos) << e;
  EXPECT_NE(e.find("at most"), std::string::npos) << e;
  EXPECT_NE(e.find("Set [data] vocab_size to"), std::string::npos) << e;
}

TEST(SentencePiece, TooSmallAVocabularyNamesTheCharacters) {
  const std::string text = read_corpus(test::corpora() / "wagahaiwa_nekodearu.txt");
  SentencePieceTraining options;
  options.vocab_size = 300;
  const std::string e = error_of([&] { train_sentencepiece(options, training_lines(text, 100000), "the novel"); });
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

TEST(Tokenizers, SaveAndLoadGiveTheSameTokenizer) {
  const std::string text = read_corpus(test::corpora() / "botchan.txt");
  std::vector<std::unique_ptr<Tokenizer>> kinds;
  kinds.push_back(std::make_unique<CharTokenizer>(CharTokenizer::from_text(text)));
  kinds.push_back(make_byte_tokenizer());
  kinds.push_back(trained(text, "unigram", 800));
  for (const auto& tok : kinds) {
    TempDir dir;
    tok->save(dir.path());
    const auto back = load_tokenizer(dir.path());
    EXPECT_EQ(back->kind(), tok->kind());
    EXPECT_EQ(back->fingerprint(), tok->fingerprint()) << tok->kind();
    EXPECT_EQ(back->encode(text.substr(0, 5000)), tok->encode(text.substr(0, 5000))) << tok->kind();
  }
  EXPECT_NE(kinds[0]->fingerprint(), kinds[1]->fingerprint());

  // A tokenizer.model swapped under its tokenizer.json is caught.
  TempDir dir;
  kinds[2]->save(dir.path());
  std::filesystem::copy_file(test::fixtures() / "sentencepiece_test_model.model", dir / "tokenizer.model",
                             std::filesystem::copy_options::overwrite_existing);
  EXPECT_NE(error_of([&] { load_tokenizer(dir.path()); }).find("is not the model"), std::string::npos);
}

TEST(Tokenizers, LoadingABadTokenizerJsonNamesTheFile) {
  TempDir dir;
  test::write_text(dir / "tokenizer.json", "{\"type\": \"wordpiece\"}");
  EXPECT_NE(error_of([&] { load_tokenizer(dir.path()); }).find("\"wordpiece\" is not one of char, byte, sentencepiece"),
            std::string::npos);
  test::write_text(dir / "tokenizer.json", "{\"type\": \"sentencepiece\"}");
  EXPECT_NE(error_of([&] { load_tokenizer(dir.path()); }).find("SentencePiece model not found"), std::string::npos);
  test::write_text(dir / "tokenizer.json", "{\"type\": ");
  EXPECT_NE(error_of([&] { load_tokenizer(dir.path()); }).find("is not valid JSON"), std::string::npos);
}

TEST(Tokenizers, LabelsAreValidUtf8) {
  const auto tok = SentencePieceTokenizer::from_file(test::fixtures() / "sentencepiece_test_model.model");
  const std::string text = read_corpus(test::corpora() / "wagahaiwa_nekodearu.txt").substr(0, 3000);
  const auto jp = trained(text + "\n", "bpe", 800, 3001);
  for (const Tokenizer* t : {static_cast<const Tokenizer*>(tok.get()), static_cast<const Tokenizer*>(jp.get())}) {
    for (int64_t id = 0; id < t->vocab_size(); ++id) {
      EXPECT_EQ(find_invalid_utf8(t->token_label(id)), std::string::npos) << id;
    }
  }
}

}  // namespace
}  // namespace tinylm
