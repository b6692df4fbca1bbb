// Token files and the token cache: the header round-trips, damage is named, a stale cache is
// rebuilt (never reused), chunked streaming equals encoding in memory, and the splits are
// nanoGPT's.

#include <gtest/gtest.h>

#include "data/char_tokenizer.h"
#include "data/corpus.h"
#include "data/io/files.h"
#include "data/sentencepiece_tokenizer.h"
#include "data/token_cache.h"
#include "data/token_file.h"
#include "test_util.h"

namespace tinylm {
namespace {

using test::error_of;

using test::TempDir;

namespace fs = std::filesystem;

struct Cache {
  TempDir dir;
  TokenCacheSpec spec;
  int tokenizers_made = 0;

  explicit Cache(std::vector<fs::path> files) {
    spec.root = dir / "cache";
    spec.kind = "char";
    spec.train_files = std::move(files);
    spec.chunk_bytes = 1000;  // many chunks, many lines cut across them
    spec.threads = 2;
  }
  fs::path cache_dir(const Tokenizer* fixed = nullptr) const {
    return token_cache_dir(spec, fixed);
  }
  PreparedCorpus prepare(std::shared_ptr<const Tokenizer> fixed = nullptr) {
    return prepare_token_cache(spec, fixed, [&]() -> std::unique_ptr<Tokenizer> {
      ++tokenizers_made;
      std::string text;
      for (const auto& f : spec.train_files) text += read_file(f);
      for (const auto& f : spec.val_files) text += read_file(f);
      return std::make_unique<CharTokenizer>(CharTokenizer::from_text(text));
    });
  }
};

TEST(TokenCache, StreamedSplitsEqualEncodingInMemory) {
  Cache cache({test::corpora() / "botchan.txt"});
  const PreparedCorpus p = cache.prepare();
  const std::string text = read_file(test::corpora() / "botchan.txt");
  const std::vector<int64_t> ids = p.tokenizer->encode(text);
  const auto n_train = static_cast<int64_t>(0.9 * static_cast<double>(ids.size()));
  ASSERT_EQ(p.train.tokens.size(), n_train);
  ASSERT_EQ(p.val.tokens.size(), static_cast<int64_t>(ids.size()) - n_train);
  EXPECT_TRUE(torch::equal(p.train.tokens.to_tensor(), torch::tensor(ids).slice(0, 0, n_train)));
  EXPECT_TRUE(torch::equal(p.val.tokens.to_tensor(), torch::tensor(ids).slice(0, n_train)));
  // The bytes behind each split add up to the file.
  EXPECT_EQ(p.train.text_bytes + p.val.text_bytes, text.size());
  EXPECT_EQ(p.val.text_bytes,
            p.tokenizer->decode(std::vector<int64_t>(ids.begin() + n_train, ids.end())).size());
}

TEST(TokenCache, ShakespeareSplitsAsNanoGPTDoes) {
  Cache cache({test::shakespeare()});
  cache.spec.chunk_bytes = size_t{1} << 20;
  const PreparedCorpus p = cache.prepare();
  EXPECT_EQ(p.tokenizer->vocab_size(), 65);
  EXPECT_EQ(p.train.tokens.size(), 1003854);
  EXPECT_EQ(p.val.tokens.size(), 111540);
  EXPECT_EQ(p.val.text_bytes, 111540u);  // ASCII: a character is a byte
  EXPECT_EQ(p.tokenizer->token_bytes(p.val.tokens.at(0)),
            read_file(test::shakespeare()).substr(1003854, 1));
}

TEST(TokenCache, SentencePieceStreamsLikeItEncodesWhole) {
  const fs::path file = test::corpora() / "wagahaiwa_nekodearu.txt";
  const std::string text = read_file(file);
  std::shared_ptr<const Tokenizer> tok =
      SentencePieceTokenizer::from_file(test::fixtures() / "sentencepiece_test_model.model");
  Cache cache({file});
  cache.spec.chunk_bytes = 4096;
  const PreparedCorpus p = cache.prepare(tok);
  std::vector<int64_t> streamed(static_cast<size_t>(p.train.tokens.size() + p.val.tokens.size()));
  p.train.tokens.copy_to(0, p.train.tokens.size(), streamed.data());
  p.val.tokens.copy_to(0, p.val.tokens.size(), streamed.data() + p.train.tokens.size());
  EXPECT_EQ(streamed, tok->encode(text));
}

TEST(TokenCache, IsReusedUntilTheCorpusOrTokenizerChanges) {
  TempDir data;
  test::write_text(data / "a.txt", "hello world\nhello again\n");
  Cache cache({data / "a.txt"});
  EXPECT_TRUE(cache.prepare().rebuilt);
  EXPECT_FALSE(cache.prepare().rebuilt);
  EXPECT_EQ(cache.tokenizers_made, 1);

  test::write_text(data / "a.txt", "hello world\nhello there\n");  // same size, new text
  EXPECT_EQ(
      token_cache_problem(cache.spec, nullptr).find("the corpus or the data settings changed"), 0u);
  EXPECT_TRUE(cache.prepare().rebuilt);

  cache.spec.train_fraction = 0.5;
  EXPECT_TRUE(cache.prepare().rebuilt);
  cache.spec.recipe_fingerprint = 7;
  EXPECT_TRUE(cache.prepare().rebuilt);
  EXPECT_FALSE(cache.prepare().rebuilt);

  // A run's own tokenizer that is not the cache's: the tokens are made with it in a directory
  // of their own, and the cache other runs read stays as it was.
  const fs::path shared = cache.cache_dir();
  const std::shared_ptr<const Tokenizer> bytes = make_byte_tokenizer();
  EXPECT_NE(cache.cache_dir(bytes.get()), shared);
  EXPECT_NE(token_cache_problem(cache.spec, bytes.get()).find("no token cache"), std::string::npos);
  const PreparedCorpus p = cache.prepare(bytes);
  EXPECT_TRUE(p.rebuilt);
  EXPECT_EQ(p.tokenizer->kind_name(), "byte");
  EXPECT_EQ(load_tokenizer(p.dir)->kind_name(), "byte");
  EXPECT_EQ(load_tokenizer(shared)->kind_name(), "char");
  EXPECT_FALSE(cache.prepare().rebuilt);
  EXPECT_FALSE(cache.prepare(bytes).rebuilt);
}

// Two configs that share data.cache_dir, one char and one byte: each gets its own tokens
// and its own tokenizer, whichever ran first, and neither rebuilds the other's.
TEST(TokenCache, TokenizersThatShareARootNeverShareFiles) {
  TempDir data;
  test::write_text(data / "a.txt", "abcabcabc\nabc\n");
  Cache chars({data / "a.txt"});
  Cache bytes({data / "a.txt"});
  bytes.spec.root = chars.spec.root;
  bytes.spec.kind = "byte";
  bytes.spec.recipe_fingerprint = 1;  // the recipe names the tokenizer, as run_corpus's does
  const PreparedCorpus c = chars.prepare();
  const PreparedCorpus b =
      prepare_token_cache(bytes.spec, nullptr, [] { return make_byte_tokenizer(); });
  EXPECT_NE(c.dir, b.dir);
  EXPECT_EQ(c.dir.parent_path(), b.dir.parent_path());
  EXPECT_EQ(b.tokenizer->kind_name(), "byte");
  EXPECT_EQ(b.tokenizer->vocab_size(), 256);
  EXPECT_EQ(load_tokenizer(c.dir)->kind_name(), "char");
  EXPECT_FALSE(chars.prepare().rebuilt);
  EXPECT_EQ(chars.prepare().tokenizer->kind_name(), "char");
}

TEST(TokenCache, ATokenFileFromAnotherTokenizerIsNotReused) {
  TempDir data;
  test::write_text(data / "a.txt", "abcabcabc\nabc\n");
  Cache chars({data / "a.txt"}), bytes({data / "a.txt"});
  chars.prepare();
  bytes.prepare(make_byte_tokenizer());
  fs::copy_file(bytes.cache_dir() / "val.bin", chars.cache_dir() / "val.bin",
                fs::copy_options::overwrite_existing);
  EXPECT_NE(token_cache_problem(chars.spec, nullptr).find("were made with another tokenizer"),
            std::string::npos);
  EXPECT_TRUE(chars.prepare().rebuilt);
  // A damaged file is a reason to rebuild, too.
  std::filesystem::resize_file(chars.cache_dir() / "train.bin", 70);
  EXPECT_NE(token_cache_problem(chars.spec, nullptr).find("truncated or corrupted"),
            std::string::npos);
  EXPECT_TRUE(chars.prepare().rebuilt);
}

TEST(TokenCache, ASeparateValCorpus) {
  TempDir data;
  test::write_text(data / "train.txt", "aaaa\nbbbb\n");
  test::write_text(data / "val.txt", "ab\n");
  Cache cache({data / "train.txt"});
  cache.spec.val_files = {data / "val.txt"};
  const PreparedCorpus p = cache.prepare();
  EXPECT_EQ(p.train.tokens.size(), 10);
  EXPECT_EQ(p.val.tokens.size(), 3);
  std::vector<int64_t> val(3);
  p.val.tokens.copy_to(0, 3, val.data());
  EXPECT_EQ(p.tokenizer->decode(val), "ab\n");
}

TEST(TokenCache, EmptyFilesAreSkippedAndAnEmptyCorpusIsAnError) {
  TempDir data;
  fs::create_directories(data / "books");
  test::write_text(data / "books/a.txt", "first book\n");
  test::write_text(data / "books/b.txt", "");
  test::write_text(data / "books/c.txt", "third book\n");
  Cache cache(corpus_files(data / "books"));
  const PreparedCorpus p = cache.prepare();
  EXPECT_EQ(p.train.text_bytes + p.val.text_bytes, 22u);

  fs::create_directories(data / "nothing");
  test::write_text(data / "nothing/a.txt", "");
  test::write_text(data / "nothing/b.txt", "");
  Cache empty(corpus_files(data / "nothing"));
  EXPECT_NE(error_of([&] { empty.prepare(); }).find("empty"), std::string::npos);
  EXPECT_FALSE(fs::exists(empty.spec.root)) << "a failed prepare leaves nothing behind";
}

TEST(TokenCache, InvalidUtf8IsNamedWithItsOffsetInTheFile) {
  TempDir data;
  std::string text;
  for (int i = 0; i < 300; ++i) text += "line " + std::to_string(i) + "\n";
  const size_t offset = text.size() - 7;
  text[offset] = '\xFF';
  test::write_text(data / "bad.txt", text);
  Cache cache({data / "bad.txt"});
  const std::string e = error_of([&] { cache.prepare(make_byte_tokenizer()); });
  EXPECT_NE(
      e.find("bad.txt is not valid UTF-8: bad byte 0xFF at byte offset " + std::to_string(offset)),
      std::string::npos)
      << e;
  EXPECT_FALSE(fs::exists(cache.spec.root)) << "a failed prepare leaves nothing behind";
}

}  // namespace
}  // namespace tinylm
