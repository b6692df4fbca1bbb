#include "train/thread_replicas.h"

#include <ATen/Parallel.h>
#include <ATen/ThreadLocalState.h>
#include <c10/util/ScopeExit.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <stdexcept>

#include "model/weight_grad_queue.h"
#include "train/autocast.h"
#include "train/run/evaluate.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace tinylm {
namespace {

// Inside a replica's thread LibTorch and oneDNN are told there is one thread, as at
// --threads 1: they plan their work for the one thread that runs it (inside a parallel region
// they would otherwise plan for all the threads and run the plan serially), so a replica
// computes what one thread alone computes. The setting is this thread's, for the region.
class AloneInRegion {
 public:
#ifdef _OPENMP
  AloneInRegion() : before_(omp_get_max_threads()) { omp_set_num_threads(1); }
  ~AloneInRegion() { omp_set_num_threads(before_); }

 private:
  int before_;
#endif
};

}  // namespace

int thread_replica_count(const GPT& model, const TrainConfig& config) {
  const int threads = at::get_num_threads();
  const bool replicable = model->device().is_cpu() && model->config().dropout == 0.0 &&
                          !model->has_hooks() && config.batch_size >= threads;
  return threads >= 2 && replicable ? threads : 1;
}

ThreadReplicas::ThreadReplicas(GPT& model, AdamW& optimizer, int count) {
  if (count < 2) throw std::invalid_argument("ThreadReplicas: needs at least 2 replicas");
  const torch::Tensor& buffer = optimizer.sync_buffer();
  model_grads_ = buffer.narrow(0, 0, buffer.size(0) - AdamW::kSideSlots);
  models_.push_back(model);
  const auto originals = model->named_parameters();
  for (int r = 1; r < count; ++r) {
    GPT replica(model->config());
    replica->train(model->is_training());
    torch::Tensor grads = torch::zeros_like(model_grads_);
    torch::NoGradGuard no_grad;
    for (auto& item : replica->named_parameters()) {
      const torch::Tensor& original = originals[item.key()];
      const torch::Tensor& original_grad = original.grad();
      // Where the optimizer put this parameter's gradient is where this replica puts its own.
      if (!original_grad.defined() || !original_grad.is_alias_of(model_grads_) ||
          !original_grad.is_contiguous())
        throw std::logic_error("ThreadReplicas: " + item.key() +
                               "'s gradient is not in the optimizer's buffer");
      const int64_t offset = original_grad.storage_offset() - model_grads_.storage_offset();
      item.value().set_data(original);  // the same storage: the optimizer's updates included
      item.value().mutable_grad() =
          grads.narrow(0, offset, original.numel()).view(original.sizes());
    }
    models_.push_back(replica);
    grads_.push_back(grads);
  }
}

double ThreadReplicas::forward_backward(const torch::Tensor& x, const torch::Tensor& y,
                                        double weight, bool bfloat16) {
  const int64_t rows = x.size(0);
  const int64_t used = std::min<int64_t>(count(), rows);
  std::vector<double> losses(static_cast<size_t>(used), 0.0);
  // The linears' weight gradients any thread may make (model/weight_grad_queue.h), but a tied
  // unembedding's, into which the embedding's backward adds too.
  WeightGradQueue queue;
  for (const GPT& m : models_)
    if (m->config().tie_weights) queue.keep_inline(m->unembedding());
  std::atomic<int64_t> in_backward{used};
  std::atomic<bool> failed{false};  // a replica threw: its thread's others will not run
  const auto replica = [&](int64_t r) {
    // Counted out however the backward ends, so that no thread waits on a failed one.
    const auto done = c10::make_scope_exit([&] { in_backward.fetch_sub(1); });
    const ScopedWeightGradQueue queued(&queue);
    // Rows [first, first + count_r): the remainder of an uneven split to the first replicas.
    const int64_t first = r * (rows / used) + std::min(r, rows % used);
    const int64_t count_r = rows / used + (r < rows % used ? 1 : 0);
    torch::Tensor loss;
    {
      Autocast autocast(bfloat16, torch::Device(torch::kCPU));
      // The share's mean loss weighted by its share of the rows: the replicas' losses sum
      // to the mean over all rows.
      loss = next_token_loss(models_[static_cast<size_t>(r)]->forward(x.narrow(0, first, count_r)),
                             y.narrow(0, first, count_r))
                 .to(torch::kFloat32) *
             (weight * static_cast<double>(count_r) / static_cast<double>(rows));
    }
    loss.backward();
    losses[static_cast<size_t>(r)] = loss.item<double>();
  };
  on_replicas(
      used,
      [&](int64_t r) {
        try {
          replica(r);
        } catch (...) {
          failed.store(true);
          throw;
        }
      },
      [&] {
        // A thread done with its replicas takes the products the others' backwards hand over,
        // until every backward is over (or one failed) and none is left. After all of its
        // replicas: waiting after the first of two, it would wait for its own second.
        queue.help_until([&] { return in_backward.load() == 0 || failed.load(); });
      });
  double total = 0.0;
  for (const double l : losses) total += l;
  return total;
}

void ThreadReplicas::gather_gradients() {
  torch::NoGradGuard no_grad;
  for (torch::Tensor& g : grads_) {
    model_grads_.add_(g);
    g.zero_();
  }
}

std::vector<double> ThreadReplicas::batch_losses(
    const std::vector<std::pair<torch::Tensor, torch::Tensor>>& batches, bool bfloat16) {
  const int64_t n = static_cast<int64_t>(batches.size());
  const int64_t used = std::min<int64_t>(count(), n);
  std::vector<double> losses(batches.size(), 0.0);
  // Each replica takes the next batch when done with its last: a slower thread takes fewer.
  // The replicas are one model, so a batch's loss is the same whichever takes it.
  std::atomic<int64_t> next{0};
  on_replicas(used, [&](int64_t r) {
    Autocast autocast(bfloat16, torch::Device(torch::kCPU));
    for (int64_t i = next.fetch_add(1); i < n; i = next.fetch_add(1)) {
      const auto& [x, y] = batches[static_cast<size_t>(i)];
      losses[static_cast<size_t>(i)] =
          next_token_loss(models_[static_cast<size_t>(r)]->forward(x), y).item<double>();
    }
  });
  return losses;
}

void ThreadReplicas::on_replicas(int64_t used, const std::function<void(int64_t r)>& work,
                                 const std::function<void()>& then) {
  // The replicas in the model's train or eval mode.
  const bool training = models_[0]->is_training();
  for (size_t r = 1; r < models_.size(); ++r)
    if (models_[r]->is_training() != training) models_[r]->train(training);
  // Grad mode, autocast's dispatch keys and a profiler's callbacks are the calling thread's;
  // each worker takes them on.
  const at::ThreadLocalState state;
  at::parallel_for(0, used, 1, [&](int64_t begin, int64_t end) {
    const at::ThreadLocalStateGuard guard(state);
    const AloneInRegion alone;
    for (int64_t r = begin; r < end; ++r) work(r);
    if (then) then();
  });
}

}  // namespace tinylm
