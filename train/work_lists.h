#pragma once
// Lists of work dealt to the threads ahead (by estimated cost), run so that unequal threads
// still end together: each thread runs its own list from the front, and once done takes the
// other lists' items not yet begun from their backs. Dealt work ends together only where the
// threads run at one speed, and a virtual CPU whose core the host shared ran 1.4x slower than
// its sibling (docs/MEASUREMENTS.md, round nineteen). Where an item's work does not depend on
// the thread that does it (each item whole on one thread), the results are the same to the
// bit whoever takes what.

#include <ATen/Parallel.h>

#include <cstddef>
#include <mutex>
#include <utility>
#include <vector>

namespace tinylm {

// run(item) once for every item of `lists`, list t on thread t (at::parallel_for) first.
template <typename Item, typename Run>
void run_work_lists(const std::vector<std::vector<Item>>& lists, const Run& run) {
  std::mutex mutex;
  std::vector<std::pair<size_t, size_t>> left;  // each list's items [front, back) not begun
  for (const auto& list : lists) left.emplace_back(0, list.size());
  const auto claim = [&](size_t t, bool front) -> const Item* {
    const std::lock_guard<std::mutex> lock(mutex);
    auto& [begin, end] = left[t];
    if (begin == end) return nullptr;
    return &lists[t][front ? begin++ : --end];
  };
  at::parallel_for(0, static_cast<int64_t>(lists.size()), 1, [&](int64_t first, int64_t last) {
    for (int64_t t = first; t < last; ++t)
      while (const Item* item = claim(static_cast<size_t>(t), true)) run(*item);
    for (size_t t = 0; t < lists.size(); ++t)
      while (const Item* item = claim(t, false)) run(*item);
  });
}

}  // namespace tinylm
