#include "tools/serve/job_pool.h"

#include <string>

namespace tinylm {

std::vector<HookHandle> cancellable(GPT& model, const Cancel& cancel) {
  std::vector<HookHandle> handles;
  for (int64_t l = 0; l < model->config().n_layer; ++l) {
    handles.push_back(model->add_hook(hook_name(l, "hook_resid_pre"),
                                      [cancel](const torch::Tensor& x, const std::string&) {
                                        if (cancel->load()) throw Cancelled();
                                        return x;
                                      }));
  }
  return handles;
}

JobPool::JobPool(int workers, size_t max_waiting) : max_waiting_(max_waiting) {
  for (int i = 0; i < workers; ++i) threads_.emplace_back([this] { work(); });
}

JobPool::~JobPool() {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  ready_.notify_all();
  for (std::thread& t : threads_) t.join();
}

std::future<void> JobPool::submit(std::function<void()> job) {
  std::packaged_task<void()> task(std::move(job));
  std::future<void> done = task.get_future();
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (queue_.size() >= max_waiting_) {
      throw QueueFull("too many heavy jobs waiting: the limit is " + std::to_string(max_waiting_) +
                      " waiting on " + std::to_string(threads_.size()) +
                      " workers (serve --heavy-jobs); try again shortly");
    }
    queue_.push_back(std::move(task));
  }
  ready_.notify_one();
  return done;
}

void JobPool::work() {
  for (;;) {
    std::packaged_task<void()> task;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      ready_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, nothing left
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();  // an exception goes to the future
  }
}

}  // namespace tinylm
