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

}  // namespace
}  // namespace tinylm
