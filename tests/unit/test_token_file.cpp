// Token files: the header round-trips, and damage is named.

#include <gtest/gtest.h>

#include "data/io/files.h"
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
  EXPECT_NE(error_of([&] { open_token_file(dir / "cut.bin"); }).find("truncated or corrupted"),
            std::string::npos);
  test::write_text(dir / "short.bin", bytes.substr(0, 10));
  EXPECT_NE(
      error_of([&] { open_token_file(dir / "short.bin"); }).find("shorter than its 64-byte header"),
      std::string::npos);
  std::string foreign = bytes;
  foreign[0] = 'X';
  test::write_text(dir / "foreign.bin", foreign);
  EXPECT_NE(
      error_of([&] { open_token_file(dir / "foreign.bin"); }).find("does not start with TLMTOKEN"),
      std::string::npos);
  std::string newer = bytes;
  newer[8] = 9;
  test::write_text(dir / "newer.bin", newer);
  EXPECT_NE(error_of([&] { read_token_file_header(dir / "newer.bin"); }).find("format version 9"),
            std::string::npos);
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

}  // namespace
}  // namespace tinylm
