#include "model/weight_grad_queue.h"

#include <c10/util/ScopeExit.h>

namespace tinylm {
namespace {

thread_local WeightGradQueue* current_queue = nullptr;

}  // namespace

WeightGradQueue::WeightGradQueue(int64_t max_pending_bytes)
    : max_pending_bytes_(max_pending_bytes) {}

void WeightGradQueue::keep_inline(const torch::Tensor& weight) {
  inline_.insert(weight.unsafeGetTensorImpl());
}

bool WeightGradQueue::queues(const torch::Tensor& weight) const {
  return inline_.count(weight.unsafeGetTensorImpl()) == 0;
}

bool WeightGradQueue::push(Task task, int64_t bytes) {
  const std::lock_guard<std::mutex> lock(mutex_);
  if (pending_bytes_ + bytes > max_pending_bytes_) return false;
  pending_bytes_ += bytes;
  tasks_.emplace_back(std::move(task), bytes);
  ++queued_so_far_;
  queued_.store(static_cast<int64_t>(tasks_.size()));
  return true;
}

bool WeightGradQueue::run_one() {
  if (queued_.load() == 0) return false;  // an idle thread's polling takes no lock
  std::pair<Task, int64_t> task;
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (tasks_.empty()) return false;
    task = std::move(tasks_.front());
    tasks_.pop_front();
    queued_.store(static_cast<int64_t>(tasks_.size()));
  }
  task.first();
  // Its operands are freed with it, here: only then do they leave the bound.
  task.first = nullptr;
  const std::lock_guard<std::mutex> lock(mutex_);
  pending_bytes_ -= task.second;
  return true;
}

int64_t WeightGradQueue::queued_so_far() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return queued_so_far_;
}

void WeightGradQueue::help_until(const std::function<bool()>& done) {
  waiting_.fetch_add(1);
  const auto leave = c10::make_scope_exit([&] { waiting_.fetch_sub(1); });
  while (true) {
    // done() first: once it holds, nothing more is queued, so a queue found empty after it
    // stays empty. (Read after, a push between the two would be left behind.)
    const bool over = done();
    if (!run_one() && over) return;
  }
}

WeightGradQueue* weight_grad_queue() { return current_queue; }

ScopedWeightGradQueue::ScopedWeightGradQueue(WeightGradQueue* queue) : before_(current_queue) {
  current_queue = queue;
}

ScopedWeightGradQueue::~ScopedWeightGradQueue() { current_queue = before_; }

}  // namespace tinylm
