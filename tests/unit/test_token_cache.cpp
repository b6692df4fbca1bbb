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

void write_tokens(const fs::path& path, const std::vector<int64_t>& ids, int64_t vocab) {
  TokenFileHeader header;
  header.token_width = token_width_for(vocab);
  header.vocab_size = static_cast<uint64_t>(vocab);
  header.tokenizer_fingerprint = 11;
  header.source_fingerprint = 22;
  TokenFileWriter writer(path, header);
  writer.append(ids.data(), ids.size());
  writer.commit(123);
}

TEST(TokenFile, RoundTripsIdsAndHeaderInBothWidths) {
  TempDir dir;
  write_tokens(dir / "a.bin", {0, 65535, 7}, 65536);
  write_tokens(dir / "b.bin", {70000, 0, 3}, 70001);
  const TokenFile a = open_token_file(dir / "a.bin"), b = open_token_file(dir / "b.bin");
  EXPECT_EQ(a.header.token_width, 2u);
  EXPECT_EQ(b.header.token_width, 4u);
  EXPECT_EQ(fs::file_size(dir / "a.bin"), 64u + 3 * 2);
  EXPECT_TRUE(torch::equal(a.tokens.to_tensor(), torch::tensor({0, 65535, 7}, torch::kInt64)));
  EXPECT_TRUE(torch::equal(b.tokens.to_tensor(), torch::tensor({70000, 0, 3}, torch::kInt64)));
  EXPECT_EQ(a.header.count, 3u);
  EXPECT_EQ(a.header.text_bytes, 123u);
  EXPECT_EQ(a.header.vocab_size, 65536u);
  EXPECT_EQ(a.header.tokenizer_fingerprint, 11u);
  EXPECT_EQ(a.header.source_fingerprint, 22u);
  EXPECT_EQ(read_token_file_header(dir / "b.bin").count, 3u);
}

TEST(TokenFile, DamageIsNamed) {
  TempDir dir;
  write_tokens(dir / "t.bin", {1, 2, 3, 4}, 10);
  std::string bytes = test::read_text(dir / "t.bin");
  test::write_text(dir / "cut.bin", bytes.substr(0, bytes.size() - 1));
  EXPECT_NE(error_of([&] { open_token_file(dir / "cut.bin"); }).find("truncated or corrupted"), std::string::npos);
  test::write_text(dir / "short.bin", bytes.substr(0, 10));
  EXPECT_NE(error_of([&] { open_token_file(dir / "short.bin"); }).find("shorter than its 64-byte header"),
            std::string::npos);
  std::string foreign = bytes;
  foreign[0] = 'X';
  test::write_text(dir / "foreign.bin", foreign);
  EXPECT_NE(error_of([&] { open_token_file(dir / "foreign.bin"); }).find("does not start with TLMTOKEN"),
            std::string::npos);
  std::string newer = bytes;
  newer[8] = 9;
  test::write_text(dir / "newer.bin", newer);
  EXPECT_NE(error_of([&] { read_token_file_header(dir / "newer.bin"); }).find("format version 9"), std::string::npos);
}

TEST(TokenFile, AnUncommittedWriterLeavesNothing) {
  TempDir dir;
  {
    TokenFileWriter writer(dir / "t.bin", TokenFileHeader{});
    const std::vector<int64_t> ids = {1, 2};
    writer.append(ids.data(), ids.size());
  }  // an exception unwinding through here is the same
  EXPECT_TRUE(fs::is_empty(dir.path()));
}

struct Cache {
  TempDir dir;
  TokenCacheSpec spec;
  int tokenizers_made = 0;

  explicit Cache(std::vector<fs::path> files) {
    spec.dir = dir / "cache";
    spec.train_files = std::move(files);
    spec.chunk_bytes = 1000;  // many chunks, many lines cut across them
    spec.threads = 2;
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
  EXPECT_EQ(p.val.text_bytes, p.tokenizer->decode(std::vector<int64_t>(ids.begin() + n_train, ids.end())).size());
}

TEST(TokenCache, ShakespeareSplitsAsNanoGPTDoes) {
  Cache cache({test::shakespeare()});
  cache.spec.chunk_bytes = size_t{1} << 20;
  const PreparedCorpus p = cache.prepare();
  EXPECT_EQ(p.tokenizer->vocab_size(), 65);
  EXPECT_EQ(p.train.tokens.size(), 1003854);
  EXPECT_EQ(p.val.tokens.size(), 111540);
  EXPECT_EQ(p.val.text_bytes, 111540u);  // ASCII: a character is a byte
  EXPECT_EQ(p.tokenizer->token_bytes(p.val.tokens.at(0)), read_file(test::shakespeare()).substr(1003854, 1));
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
  EXPECT_EQ(token_cache_problem(cache.spec, nullptr).find("the corpus or the data settings changed"), 0u);
  EXPECT_TRUE(cache.prepare().rebuilt);

  cache.spec.train_fraction = 0.5;
  EXPECT_TRUE(cache.prepare().rebuilt);
  cache.spec.recipe_fingerprint = 7;
  EXPECT_TRUE(cache.prepare().rebuilt);
  EXPECT_FALSE(cache.prepare().rebuilt);

  // A run's own tokenizer that is not the cache's: the tokens are remade with it.
  const std::shared_ptr<const Tokenizer> bytes = make_byte_tokenizer();
  EXPECT_NE(token_cache_problem(cache.spec, bytes.get()).find("another tokenizer than this run's"), std::string::npos);
  const PreparedCorpus p = cache.prepare(bytes);
  EXPECT_TRUE(p.rebuilt);
  EXPECT_EQ(p.tokenizer->kind(), "byte");
  EXPECT_EQ(load_tokenizer(cache.spec.dir)->kind(), "byte");
}

TEST(TokenCache, ATokenFileFromAnotherTokenizerIsNotReused) {
  TempDir data;
  test::write_text(data / "a.txt", "abcabcabc\nabc\n");
  Cache chars({data / "a.txt"}), bytes({data / "a.txt"});
  chars.prepare();
  bytes.prepare(make_byte_tokenizer());
  fs::copy_file(bytes.spec.dir / "val.bin", chars.spec.dir / "val.bin", fs::copy_options::overwrite_existing);
  EXPECT_NE(token_cache_problem(chars.spec, nullptr).find("were made with another tokenizer"), std::string::npos);
  EXPECT_TRUE(chars.prepare().rebuilt);
  // A damaged file is a reason to rebuild, too.
  std::filesystem::resize_file(chars.spec.dir / "train.bin", 70);
  EXPECT_NE(token_cache_problem(chars.spec, nullptr).find("truncated or corrupted"), std::string::npos);
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
  EXPECT_FALSE(fs::exists(empty.spec.dir / "train.bin"));
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
  EXPECT_NE(e.find("bad.txt is not valid UTF-8: bad byte 0xFF at byte offset " + std::to_string(offset)),
            std::string::npos) << e;
  EXPECT_FALSE(fs::exists(cache.spec.dir / "train.bin"));
}

}  // namespace
}  // namespace tinylm
