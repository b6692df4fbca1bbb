#pragma once
// Data parallel over the threads of one process. A small model's operators are too small to
// split well over threads: every one of a step's few hundred operators pays a parallel
// region's fork, join and spin-wait for a few microseconds of work. Here instead each thread
// takes a share of a micro-batch's rows through a replica of the model of its own, every
// operator of its forward and backward on that one thread, and the replicas' gradients are
// summed in replica order.
//
// A replica's parameters alias the model's (the optimizer's flat buffer), so an update
// reaches every replica at once; only its gradients are its own, in a buffer laid out as the
// optimizer's, so that summing them is one add per replica. The sum is the gradient of the
// micro-batch's mean loss, as one thread over all its rows would compute it, to float
// rounding, and the same from run to run at a given number of threads. A thread done with its
// own backward makes the slower ones' weight-gradient products (model/weight_grad_queue.h),
// to the same bits.

#include <functional>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "model/gpt.h"
#include "train/adamw.h"
#include "train/run/run_config.h"

namespace tinylm {

// How many replicas a training step on `device` uses: the intra-op threads, where there are
// at least two, the model is on the CPU, has no dropout (replicas would draw from one
// generator in a racing order) and no hooks (they would not see the other replicas), and a
// micro-batch has rows for each; otherwise 1, meaning none: operators split over threads.
int thread_replica_count(const GPT& model, const TrainConfig& config);

class ThreadReplicas {
 public:
  // `count` >= 2 replicas, the first `model` itself, whose parameters and gradients
  // `optimizer` already holds (train/adamw.h).
  ThreadReplicas(GPT& model, AdamW& optimizer, int count);

  int count() const { return static_cast<int>(models_.size()); }

  // Forward (under bfloat16 autocast if `bfloat16`) and backward of (x, y) (B, T), its rows
  // split over the replicas in order, one thread each; returns the mean next-token loss over
  // all rows times `weight`, the factor its gradient carries too. Gradients accumulate in
  // each replica's own buffer.
  double forward_backward(const torch::Tensor& x, const torch::Tensor& y, double weight,
                          bool bfloat16);

  // Adds the other replicas' gradients into the model's, in replica order, and zeroes theirs.
  void gather_gradients();

  // The mean next-token loss of each batch (x, y), forward only, in the calling thread's grad
  // mode, each replica on a thread of its own taking the next batch when done with its last;
  // in batch order.
  std::vector<double> batch_losses(
      const std::vector<std::pair<torch::Tensor, torch::Tensor>>& batches, bool bfloat16);

 private:
  // work(r) for replicas [0, used), a thread each, the replicas in the model's train or eval
  // mode and each thread in the caller's grad mode and autocast, planning for one thread; then
  // `then()` on each thread once it is done with its replicas (a thread takes several where
  // fewer threads come than replicas: at --threads 1, or inside another parallel region).
  void on_replicas(int64_t used, const std::function<void(int64_t r)>& work,
                   const std::function<void()>& then = {});

  std::vector<GPT> models_;           // models_[0] is the model itself
  torch::Tensor model_grads_;         // (N,): the optimizer's gradients
  std::vector<torch::Tensor> grads_;  // (N,) per replica after the first
};

}  // namespace tinylm
