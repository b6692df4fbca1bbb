#pragma once
// The lab's heavy work (ablation sweeps, patching, head scores, eval) runs here, on a fixed
// number of workers with a bounded queue, so that one client cannot starve the others: the
// HTTP threads stay free for light requests, and a request that finds the queue full is
// refused at once (503) with the limit named. Each job carries a Cancel flag that its
// request sets when the client goes away; the job's forward passes then stop (cancellable).

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "model/gpt.h"
#include "model/hook_point.h"

namespace tinylm {

using Cancel = std::shared_ptr<std::atomic<bool>>;

// Thrown out of a forward pass whose request was cancelled.
struct Cancelled : std::runtime_error {
  Cancelled() : std::runtime_error("cancelled: the client went away") {}
};

// While the handles live, every forward pass of `model` on this thread throws Cancelled
// once `cancel` is set, checked as each block begins (hook_resid_pre): passes that start at
// a layer from a cached stream (ablation, patching) stop too, within a block's time.
[[nodiscard]] std::vector<HookHandle> cancellable(GPT& model, const Cancel& cancel);

struct QueueFull : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class JobPool {
 public:
  JobPool(int workers, size_t max_waiting);
  ~JobPool();  // finishes the jobs already queued, then joins
  JobPool(const JobPool&) = delete;
  JobPool& operator=(const JobPool&) = delete;

  // Queues `job`; throws QueueFull when max_waiting jobs already wait.
  std::future<void> submit(std::function<void()> job);

 private:
  void work();

  size_t max_waiting_;
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::packaged_task<void()>> queue_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace tinylm
