#pragma once
// Weight gradients that any thread may make. Thread replicas (train/thread_replicas.h) each run
// a share of a batch's rows forward and backward on a thread of their own, and a step waits
// for the slowest. When one CPU is slower than the other (a virtual CPU whose core the host
// shares, a laptop's efficiency core), the faster thread waited 1-2 ms of a 7-10 ms step
// (docs/MEASUREMENTS.md, round nineteen). While a thread has a queue installed
// (ScopedWeightGradQueue), the backward of the fused linears on it (model/fused_linear.h)
// hands the product dW += dy^T x to the queue whenever another thread is waiting in
// help_until, done with its own backward: that thread makes it while the backward goes on.
// With no thread waiting the product is made at once, as before, its operands still in cache:
// queued to the backward's end, a step's 26 products took 2.6 ms of the two threads against
// 1.7 with their operands in cache (docs/MEASUREMENTS.md, round nineteen).
//
// The gradients stay the same to the bit: a product's arithmetic is the same on any thread and
// at any time, it adds into the weight's own gradient (one float32 addition per element, as
// autograd's accumulation makes it), and nothing else touches that gradient before the step's
// gather. A weight whose gradient autograd also accumulates during the backward (the token
// embedding tied to the unembedding) is kept inline (keep_inline), so that no two threads add
// into one gradient.

#include <atomic>
#include <deque>
#include <functional>
#include <mutex>
#include <unordered_set>
#include <utility>

#include <torch/torch.h>

namespace tinylm {

class WeightGradQueue {
 public:
  using Task = std::function<void()>;

  // Queued products hold their operands until they run: at most `max_pending_bytes` of them.
  explicit WeightGradQueue(int64_t max_pending_bytes = int64_t{256} << 20);

  // The products of `weight`'s gradient are made where the backward runs, never queued.
  void keep_inline(const torch::Tensor& weight);
  bool queues(const torch::Tensor& weight) const;

  // Whether a thread waits in help_until: a task queued now would be made beside the backward
  // that queued it.
  bool someone_waits() const { return waiting_.load() > 0; }

  // Queues `task`, which holds `bytes` until it runs. Returns false, queueing nothing, when
  // that would pass the bound: the caller then runs it itself.
  bool push(Task task, int64_t bytes);

  // Runs the oldest queued task on the calling thread; false when none is queued.
  bool run_one();

  // How many tasks push has queued, ever.
  int64_t queued_so_far() const;

  // Runs queued tasks, whoever queued them, until `done()` holds and none is left. `done()`
  // must hold only once every push it waits for has been made.
  void help_until(const std::function<bool()>& done);

 private:
  const int64_t max_pending_bytes_;
  std::unordered_set<const c10::TensorImpl*> inline_;  // set before the backward, read only after
  std::atomic<int> waiting_{0};                        // threads in help_until
  mutable std::mutex mutex_;
  std::deque<std::pair<Task, int64_t>> tasks_;
  std::atomic<int64_t> queued_{0};  // tasks_'s size, read without the lock by waiting threads
  int64_t pending_bytes_ = 0;
  int64_t queued_so_far_ = 0;
};

// The calling thread's queue, or nullptr when none is installed.
WeightGradQueue* weight_grad_queue();

// Installs `queue` as the calling thread's for the scope (nullptr: none).
class ScopedWeightGradQueue {
 public:
  explicit ScopedWeightGradQueue(WeightGradQueue* queue);
  ~ScopedWeightGradQueue();
  ScopedWeightGradQueue(const ScopedWeightGradQueue&) = delete;
  ScopedWeightGradQueue& operator=(const ScopedWeightGradQueue&) = delete;

 private:
  WeightGradQueue* before_;
};

}  // namespace tinylm
