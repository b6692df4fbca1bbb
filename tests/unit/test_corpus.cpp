// The corpus: one file or a directory of *.txt, empty files named, and the chunked reader
// that cuts only after a newline.

#include <gtest/gtest.h>

#include "data/corpus.h"
#include "data/utf8.h"
#include "test_util.h"

namespace tinylm {
namespace {

using test::error_of;

using test::TempDir;

TEST(Corpus, ReadsADirectoryOfTextFilesInSortedOrder) {
  TempDir dir;
  std::filesystem::create_directories(dir / "sub");
  test::write_text(dir / "b.txt", "second ");
  test::write_text(dir / "a.txt", "first ");
  test::write_text(dir / "sub/c.txt", "third");
  test::write_text(dir / "notes.md", "ignored");
  EXPECT_EQ(read_corpus(dir.path()), "first second third");
}

TEST(Corpus, MissingEmptyOrInvalidIsAnError) {
  TempDir dir;
  EXPECT_NE(error_of([&] { read_corpus(dir / "nope.txt"); }).find("corpus not found"),
            std::string::npos);
  test::write_text(dir / "empty.txt", "");
  EXPECT_NE(error_of([&] { read_corpus(dir / "empty.txt"); }).find("is empty"), std::string::npos);
  test::write_text(dir / "bad.txt", "hello\xFFworld");
  const std::string e = error_of([&] { read_corpus(dir / "bad.txt"); });
  EXPECT_NE(e.find("bad.txt is not valid UTF-8"), std::string::npos) << e;
  EXPECT_NE(e.find("byte offset 5"), std::string::npos) << e;
}

TEST(CorpusReader, ChunksEndAtLineEndsAndAHugeLineIsCutBetweenCharacters) {
  TempDir dir;
  std::string lines;
  for (int i = 0; i < 200; ++i) lines += "line " + std::to_string(i) + "\n";
  std::string huge;
  for (int i = 0; i < 2000; ++i)
    huge += "\xE3\x81\x82";  // 6000 bytes of 3-byte characters, no line end
  test::write_text(dir / "a.txt", lines);
  test::write_text(dir / "b.txt", huge);
  CorpusReader reader({dir / "a.txt", dir / "b.txt"}, 64);
  EXPECT_EQ(reader.total_bytes(), lines.size() + huge.size());
  std::string a, b;
  CorpusReader::Chunk chunk;
  int chunks = 0;
  while (reader.next(chunk)) {
    ++chunks;
    EXPECT_EQ(find_invalid_utf8(chunk.text), std::string::npos) << chunk.offset;
    if (chunk.file == dir / "a.txt") {
      EXPECT_EQ(chunk.text.back(), '\n');
      EXPECT_EQ(chunk.offset, a.size());
      a += chunk.text;
    } else {
      EXPECT_LE(chunk.text.size(), 16u * 64 + 64);  // bounded, though the line is not
      EXPECT_EQ(chunk.offset, b.size());
      b += chunk.text;
    }
  }
  EXPECT_EQ(a, lines);
  EXPECT_EQ(b, huge);
  EXPECT_GT(chunks, 10);
  EXPECT_EQ(reader.bytes_read(), reader.total_bytes());
}

}  // namespace
}  // namespace tinylm
