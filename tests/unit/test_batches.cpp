// Batches: random windows (nanoGPT's), and epoch sampling, which sees every window once per
// epoch and resumes its order.

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "data/batches.h"
#include "data/token_sequence.h"
#include "test_util.h"

namespace tinylm {
namespace {

using test::error_of;

TokenSequence arange_tokens(int64_t n) {
  std::vector<int64_t> ids(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) ids[static_cast<size_t>(i)] = i;
  return TokenSequence::from_ids(std::move(ids));
}

TEST(Batches, TargetsAreInputsShiftedByOne) {
  const BatchSampler sampler(arange_tokens(100), 10, 5, "train");
  auto rng = at::make_generator<at::CPUGeneratorImpl>(4);
  const auto [x, y] = sampler.sample(rng);
  ASSERT_EQ(x.sizes().vec(), (std::vector<int64_t>{5, 10}));
  EXPECT_TRUE(torch::equal(y, x + 1));  // arange: each window is consecutive
  EXPECT_TRUE(torch::equal(x.slice(1, 1), x.slice(1, 0, 9) + 1));
  EXPECT_LE(y.max().item<int64_t>(), 99);
}

TEST(Batches, SameGeneratorStateSameBatches) {
  const BatchSampler sampler(arange_tokens(1000), 16, 4, "train");
  auto a = at::make_generator<at::CPUGeneratorImpl>(11),
       b = at::make_generator<at::CPUGeneratorImpl>(11);
  for (int i = 0; i < 3; ++i)
    EXPECT_TRUE(torch::equal(sampler.sample(a).first, sampler.sample(b).first));
  EXPECT_FALSE(torch::equal(sampler.sample(a).first, sampler.sample(a).first));
}

TEST(Batches, TooShortSplitNamesIt) {
  const std::string e = error_of([] { BatchSampler(arange_tokens(64), 64, 1, "val"); });
  EXPECT_NE(e.find("the val split has 64 tokens, fewer than block_size + 1 = 65"),
            std::string::npos)
      << e;
  EXPECT_NO_THROW(BatchSampler(arange_tokens(65), 64, 1, "val"));
}

TEST(EpochSampler, SeesEveryWindowExactlyOncePerEpoch) {
  // 1001 tokens, T = 10: windows start at 0, 10, ..., 990 (100 of them); batches of 7 do not
  // divide 100, so batches straddle epochs.
  EpochSampler sampler(arange_tokens(1001), 10, 7, "train", 5);
  ASSERT_EQ(sampler.windows_per_epoch(), 100);
  std::vector<std::vector<int64_t>> epochs(3);
  for (int batch = 0; batch < 300 / 7; ++batch) {
    const int64_t epoch_before = sampler.position().epoch;
    const int64_t position_before = sampler.position().position;
    const auto [x, y] = sampler.next();
    EXPECT_TRUE(torch::equal(y, x + 1));
    for (int64_t b = 0; b < 7; ++b) {
      const int64_t drawn = position_before + b;
      epochs[static_cast<size_t>(epoch_before + drawn / 100)].push_back(x[b][0].item<int64_t>());
    }
  }
  for (int e = 0; e < 2; ++e) {  // the first two epochs are complete
    std::vector<int64_t> starts = epochs[static_cast<size_t>(e)];
    ASSERT_EQ(starts.size(), 100u) << "epoch " << e;
    std::sort(starts.begin(), starts.end());
    for (int64_t i = 0; i < 100; ++i)
      EXPECT_EQ(starts[static_cast<size_t>(i)], 10 * i) << "epoch " << e;
  }
  EXPECT_NE(epochs[0], epochs[1]);  // shuffled afresh each epoch
}

TEST(EpochSampler, SeekingToASavedPositionContinuesTheSameOrder) {
  EpochSampler unbroken(arange_tokens(1001), 10, 7, "train", 5);
  EpochSampler resumed(arange_tokens(1001), 10, 7, "train", 5);
  for (int i = 0; i < 20; ++i) unbroken.next();  // 140 windows: into the second epoch
  const EpochPosition saved = unbroken.position();
  EXPECT_EQ(saved.epoch, 1);
  EXPECT_EQ(saved.position, 40);
  resumed.seek(saved);
  for (int i = 0; i < 30; ++i)
    EXPECT_TRUE(torch::equal(unbroken.next().first, resumed.next().first)) << i;
  EXPECT_THROW(resumed.seek({0, 101}), std::runtime_error);
  // Another seed, another order.
  EXPECT_FALSE(torch::equal(EpochSampler(arange_tokens(1001), 10, 7, "train", 6).order(0),
                            EpochSampler(arange_tokens(1001), 10, 7, "train", 5).order(0)));
}

}  // namespace
}  // namespace tinylm
