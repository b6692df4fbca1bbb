// UTF-8 validation: the offset of the first bad byte, and what makes a sequence bad.

#include <gtest/gtest.h>

#include "data/utf8.h"
#include "test_util.h"

namespace tinylm {
namespace {

using test::error_of;

TEST(Utf8, RejectsInvalidBytesWithTheirOffset) {
  EXPECT_NE(error_of([] { decode_utf8("ab\xC3(", "x"); }).find("byte offset 2"), std::string::npos);
  EXPECT_NE(error_of([] { decode_utf8("\xC0\xAF", "x"); }).find("byte offset 0"),
            std::string::npos);  // overlong
  EXPECT_NE(error_of([] { decode_utf8("ok\xED\xA0\x80", "x"); }).find("byte offset 2"),
            std::string::npos);  // surrogate
  EXPECT_NE(error_of([] { decode_utf8("abc\xE2\x82", "x"); }).find("byte offset 3"),
            std::string::npos);  // truncated
  EXPECT_EQ(decode_utf8("a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80", "x"),
            (std::vector<char32_t>{U'a', U'\u00E9', U'\u20AC', U'\U0001F600'}));
}

// Worked examples, each checked against Python's bytes.decode("utf-8", errors="replace"),
// which replaces a maximal invalid subpart with one U+FFFD.
TEST(Utf8, PrintableTextReplacesInvalidBytesAndWaitsForASplitCharacter) {
  const std::string fffd = "\xEF\xBF\xBD";
  size_t used = 0, replaced = 0;
  // "€" split across two tokens: the first half waits, then the whole prints.
  EXPECT_EQ(printable_utf8("a\xE2\x82", false, used, replaced), "a");
  EXPECT_EQ(used, 1u);
  EXPECT_EQ(printable_utf8("\xE2\x82\xAC", false, used, replaced), "\xE2\x82\xAC");
  EXPECT_EQ(used, 3u);
  EXPECT_EQ(replaced, 0u);
  // At the end nothing more comes: b"a\xe2\x82" -> "a\ufffd" (one for the two bytes).
  EXPECT_EQ(printable_utf8("a\xE2\x82", true, used, replaced), "a" + fffd);
  EXPECT_EQ(used, 3u);
  EXPECT_EQ(replaced, 2u);
  // b"\xff\xc7A\xe2\x82B" -> "\ufffd\ufffdA\ufffdB": a bad byte, a lead cut short by "A", and
  // a three-byte lead cut short by "B" (one replacement for its two bytes).
  replaced = 0;
  EXPECT_EQ(printable_utf8("\xFF\xC7"
                           "A\xE2\x82"
                           "B",
                           false, used, replaced),
            fffd + fffd + "A" + fffd + "B");
  EXPECT_EQ(used, 6u);
  EXPECT_EQ(replaced, 4u);
  EXPECT_EQ(find_invalid_utf8(printable_utf8("\xC0\xAF\xED\xA0\x80", true, used, replaced)),
            std::string::npos);
}

}  // namespace
}  // namespace tinylm
