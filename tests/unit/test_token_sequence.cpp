// TokenSequence: slices and copies of memory-mapped or in-memory ids.

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "data/token_sequence.h"

namespace tinylm {
namespace {

TEST(TokenSequence, ReadsEveryWidthAndSlices) {
  const std::vector<uint16_t> narrow = {1, 65535, 7, 0};
  const std::vector<uint32_t> wide = {70000, 2, 4000000000u};
  const TokenSequence a(nullptr, narrow.data(), 2, 4), b(nullptr, wide.data(), 4, 3);
  EXPECT_EQ(a.at(1), 65535);
  EXPECT_EQ(b.at(2), 4000000000LL);
  EXPECT_TRUE(torch::equal(a.slice(1, 3).to_tensor(), torch::tensor({65535, 7}, torch::kInt64)));
  EXPECT_THROW(a.slice(2, 5), std::out_of_range);
  int64_t out[2];
  EXPECT_THROW(b.copy_to(2, 2, out), std::out_of_range);
}

}  // namespace
}  // namespace tinylm
