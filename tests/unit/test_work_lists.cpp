// Work lists (train/work_lists.h): every item runs once, each list's own thread taking it from
// the front, and a thread done with its own list takes a slow thread's items not yet begun.

#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "test_util.h"
#include "train/work_lists.h"

namespace tinylm {
namespace {

using test::ThreadCount;

TEST(WorkLists, RunEveryItemOnce) {
  for (const int threads : {1, 2, 3}) {
    const ThreadCount count(threads);
    std::vector<std::vector<int>> lists(static_cast<size_t>(threads));
    int items = 0;
    for (int t = 0; t < threads; ++t)
      for (int i = 0; i < 5 + 3 * t; ++i) lists[static_cast<size_t>(t)].push_back(items++);
    lists.push_back({});  // a list with no thread of its own
    lists.back().push_back(items++);
    std::vector<std::atomic<int>> runs(static_cast<size_t>(items));
    run_work_lists(lists, [&](int item) { runs[static_cast<size_t>(item)].fetch_add(1); });
    for (int i = 0; i < items; ++i)
      EXPECT_EQ(runs[static_cast<size_t>(i)].load(), 1) << "item " << i << ", " << threads;
  }
}

// List 0 is [0, 1, 2], list 1 is [3]. Item 3 does not end until item 0 has begun (on list 0's
// own thread, the other being in item 3), and item 0 not until item 2 has run: only the other
// thread, done with item 3, can take item 2 from the back of list 0. Each wait is bounded (60
// s), failing rather than hanging if what it waits for never comes.
TEST(WorkLists, AThreadDoneWithItsListTakesTheOthersFromTheBack) {
  const ThreadCount count(2);
  const std::vector<std::vector<int>> lists{{0, 1, 2}, {3}};
  std::vector<std::thread::id> ran_on(4);
  std::atomic<bool> zero_began{false}, two_ran{false}, waited_out{false};
  const auto wait_for = [&](const std::atomic<bool>& flag) {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!flag.load()) {
      if (std::chrono::steady_clock::now() > give_up) return waited_out.store(true);
      std::this_thread::yield();
    }
  };
  run_work_lists(lists, [&](int item) {
    ran_on[static_cast<size_t>(item)] = std::this_thread::get_id();
    if (item == 0) {
      zero_began.store(true);
      wait_for(two_ran);
    }
    if (item == 2) two_ran.store(true);
    if (item == 3) wait_for(zero_began);
  });
  EXPECT_FALSE(waited_out.load()) << "item 2 was not taken while item 0 ran";
  EXPECT_NE(ran_on[3], ran_on[0]);
  EXPECT_EQ(ran_on[2], ran_on[3]);  // item 1 is either thread's
}

}  // namespace
}  // namespace tinylm
