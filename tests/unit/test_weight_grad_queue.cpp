// Weight gradients any thread may make (model/weight_grad_queue.h): the queue runs each task
// once, oldest first, on whichever thread asks, within its bound; and a fused linear's
// backward under a queue hands its weight's product to a waiting thread, which makes the
// gradient autograd makes without a queue, to the bit. float32_linear runs on every CPU with
// either library's products (the BLAS's always; oneDNN's wherever its API was built);
// bfloat16_linear where oneDNN has bfloat16.

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <atomic>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "model/fused_linear.h"
#include "model/ops/onednn_matmul.h"
#include "model/weight_grad_queue.h"
#include "train/autocast.h"

namespace tinylm {
namespace {

TEST(WeightGradQueue, RunsTasksOnceOldestFirstWithinItsBound) {
  WeightGradQueue queue(100);
  std::vector<int> ran;
  EXPECT_FALSE(queue.run_one());
  EXPECT_TRUE(queue.push([&] { ran.push_back(1); }, 60));
  EXPECT_TRUE(queue.push([&] { ran.push_back(2); }, 40));
  // 100 bytes held: one more would pass the bound, and is not queued.
  EXPECT_FALSE(queue.push([&] { ran.push_back(3); }, 1));
  EXPECT_TRUE(queue.run_one());
  EXPECT_EQ(ran, std::vector<int>({1}));
  // The first task's 60 bytes are free again.
  EXPECT_TRUE(queue.push([&] { ran.push_back(4); }, 60));
  while (queue.run_one()) {}
  EXPECT_EQ(ran, std::vector<int>({1, 2, 4}));
}

// A thread in help_until makes what another queues, and leaves once told and none is left.
TEST(WeightGradQueue, AWaitingThreadMakesWhatAnotherQueues) {
  WeightGradQueue queue;
  constexpr int kTasks = 2000;
  std::vector<std::atomic<int>> runs(kTasks);
  std::atomic<int> by_helper{0};
  std::atomic<bool> pushed{false};
  EXPECT_FALSE(queue.someone_waits());
  const std::thread::id main_thread = std::this_thread::get_id();
  std::thread helper([&] { queue.help_until([&] { return pushed.load(); }); });
  while (!queue.someone_waits()) std::this_thread::yield();
  for (int i = 0; i < kTasks; ++i) {
    EXPECT_TRUE(queue.push(  // not ASSERT: returning would leave the helper unjoined
        [&, i] {
          runs[i].fetch_add(1);
          if (std::this_thread::get_id() != main_thread) by_helper.fetch_add(1);
        },
        1));
    if (i % 2 == 0) queue.run_one();
  }
  pushed.store(true);
  helper.join();
  EXPECT_FALSE(queue.someone_waits());
  EXPECT_FALSE(queue.run_one());  // the helper left none
  EXPECT_EQ(queue.queued_so_far(), kTasks);
  // This thread ran at most every other task; the helper the rest.
  EXPECT_GE(by_helper.load(), kTasks / 2);
  for (int i = 0; i < kTasks; ++i) EXPECT_EQ(runs[i].load(), 1) << "task " << i;
}

// A thread waiting on `queue` for the scope, as a replica's that is done with its backward.
class WaitingThread {
 public:
  explicit WaitingThread(WeightGradQueue& queue)
      : thread_([this, &queue] { queue.help_until([this] { return over_.load(); }); }) {
    while (!queue.someone_waits()) std::this_thread::yield();
  }
  ~WaitingThread() {
    over_.store(true);
    thread_.join();
  }

 private:
  std::atomic<bool> over_{false};
  std::thread thread_;
};

TEST(WeightGradQueue, IsTheThreadsOwnForItsScope) {
  WeightGradQueue outer, inner;
  EXPECT_EQ(weight_grad_queue(), nullptr);
  {
    const ScopedWeightGradQueue a(&outer);
    EXPECT_EQ(weight_grad_queue(), &outer);
    {
      const ScopedWeightGradQueue b(&inner);
      EXPECT_EQ(weight_grad_queue(), &inner);
      std::thread([] { EXPECT_EQ(weight_grad_queue(), nullptr); }).join();
    }
    EXPECT_EQ(weight_grad_queue(), &outer);
  }
  EXPECT_EQ(weight_grad_queue(), nullptr);
}

struct Weights {
  torch::Tensor weight, bias;
};

Weights linear(int64_t in, int64_t out, bool with_grads) {
  torch::manual_seed(11);
  Weights l{torch::randn({out, in}).requires_grad_(), torch::randn({out}).requires_grad_()};
  if (with_grads) {
    // Gradients from an earlier micro-batch, which the products add to.
    l.weight.mutable_grad() = torch::randn({out, in});
    l.bias.mutable_grad() = torch::randn({out});
  }
  return l;
}

// One backward of linear(x) . g, under `queue` when given; x's gradient returned. In
// bfloat16, or in float32 with `products`.
torch::Tensor backward(const Weights& l, const torch::Tensor& x_in, bool bfloat16,
                       Float32Products products, WeightGradQueue* queue) {
  const torch::Tensor x = x_in.detach().requires_grad_();
  torch::manual_seed(12);
  const torch::Tensor g = torch::randn({x.size(0), l.weight.size(0)});
  torch::Tensor y;
  {
    Autocast autocast(bfloat16, torch::Device(torch::kCPU));
    y = bfloat16 ? bfloat16_linear(x, l.weight, l.bias)
                 : float32_linear(x, l.weight, l.bias, products);
  }
  const ScopedWeightGradQueue scoped(queue);
  (y.to(torch::kFloat32) * g).sum().backward();
  return x.grad();
}

void expect_queued_product_equals_autograds(bool bfloat16,
                                            Float32Products products = Float32Products::kOnednn) {
  const torch::Tensor x = torch::randn({37, 24});
  const Weights reference = linear(24, 40, true), queued = linear(24, 40, true);
  const torch::Tensor reference_dx = backward(reference, x, bfloat16, products, nullptr);
  WeightGradQueue queue;
  torch::Tensor dx;
  {
    const WaitingThread waiting(queue);
    dx = backward(queued, x, bfloat16, products, &queue);
  }
  EXPECT_EQ(queue.queued_so_far(), 1);  // the weight's product, made by the waiting thread
  EXPECT_TRUE(torch::equal(dx, reference_dx));
  EXPECT_TRUE(torch::equal(queued.bias.grad(), reference.bias.grad()));
  EXPECT_TRUE(torch::equal(queued.weight.grad(), reference.weight.grad()))
      << "largest difference "
      << (queued.weight.grad() - reference.weight.grad()).abs().max().item<double>();
}

TEST(WeightGradQueue, AFloat32LinearsQueuedProductIsAutogradsGradient) {
  if (!onednn_matmul_built()) GTEST_SKIP() << "this build has no oneDNN API (libdnnl-dev)";
  expect_queued_product_equals_autograds(false, Float32Products::kOnednn);
}

// The BLAS's product adds into the gradient with beta 1 (AVX2-only CPUs' float32 linears).
TEST(WeightGradQueue, AFloat32LinearsQueuedBlasProductIsAutogradsGradient) {
  expect_queued_product_equals_autograds(false, Float32Products::kBlas);
}

TEST(WeightGradQueue, ABfloat16LinearsQueuedProductIsAutogradsGradient) {
  if (!onednn_matmul_built()) GTEST_SKIP() << "this build has no oneDNN API (libdnnl-dev)";
  if (!onednn_bfloat16_runs()) GTEST_SKIP() << "oneDNN has no bfloat16 product on this CPU";
  expect_queued_product_equals_autograds(true);
}

// Nothing is queued where no thread waits (made at once, its operands in cache), where the
// product has nowhere to add (no gradient yet), where the queue keeps the weight inline, or
// past the queue's bound: each way the gradient is autograd's.
// (The BLAS's products, which every build has.)
TEST(WeightGradQueue, MakesInlineWhatItCannotHandOver) {
  constexpr Float32Products kBlas = Float32Products::kBlas;
  const torch::Tensor x = torch::randn({9, 8});
  for (const bool with_grads : {false, true}) {
    const Weights reference = linear(8, 5, with_grads);
    backward(reference, x, false, kBlas, nullptr);
    for (const std::string way : {"no thread waits", "inline", "over the bound"}) {
      const Weights l = linear(8, 5, with_grads);
      WeightGradQueue queue(way == "over the bound" ? 0 : int64_t{1} << 20);
      if (way == "inline") queue.keep_inline(l.weight);
      {
        std::optional<WaitingThread> waiting;
        if (way != "no thread waits") waiting.emplace(queue);
        backward(l, x, false, kBlas, &queue);
      }
      EXPECT_EQ(queue.queued_so_far(), 0) << way << ", with gradients " << with_grads;
      EXPECT_TRUE(torch::equal(l.weight.grad(), reference.weight.grad()))
          << way << ", with gradients " << with_grads;
    }
  }
}

}  // namespace
}  // namespace tinylm
