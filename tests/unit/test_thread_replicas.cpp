// Data parallel over threads (train/thread_replicas.h): the replicas' summed gradient is the
// one a single thread computes through the same shares of the batch, bit for bit, step after
// step (so an update reaches every replica), and replicas are used only where they are exact.

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "small_model.h"
#include "train/adamw.h"
#include "train/autocast.h"
#include "train/run/evaluate.h"
#include "train/thread_replicas.h"

namespace tinylm {
namespace {

using test::small_config;
using test::ThreadCount;

struct Case {
  int replicas;
  int64_t rows;
  bool bfloat16;
  int64_t n_embd = 16;
  bool tied = true;  // the unembedding is the token embedding, whose gradient is summed inline
};

class ThreadReplicasSum : public ::testing::TestWithParam<Case> {};

// Two replicas over 8 rows, and three over 7 (shares of 3, 2 and 2), in float32 and in
// bfloat16 autocast (forced: emulated where the CPU has no bfloat16 units); and 64 wide, where
// LibTorch hands bfloat16 products to oneDNN (past 16^3 multiply-adds), inside the region;
// with the unembedding tied to the token embedding and, as the default recipe, not. Where the
// linears are fused (model/fused_linear.h: in float32 on every CPU, in bfloat16 where oneDNN
// runs it), their weight gradients are queued products any replica's thread makes
// (model/weight_grad_queue.h).
INSTANTIATE_TEST_SUITE_P(Shapes, ThreadReplicasSum,
                         ::testing::Values(Case{2, 8, false}, Case{2, 8, true}, Case{3, 7, false},
                                           Case{3, 7, true}, Case{2, 8, true, 64},
                                           Case{2, 8, true, 16, false},
                                           Case{3, 7, false, 16, false}),
                         [](const auto& info) {
                           return std::to_string(info.param.replicas) + "_over_" +
                                  std::to_string(info.param.rows) +
                                  (info.param.bfloat16 ? "_bfloat16" : "_float32") + "_" +
                                  std::to_string(info.param.n_embd) + "_wide" +
                                  (info.param.tied ? "" : "_untied");
                         });

// The reference: one thread, each replica's share in turn through one model, its loss
// weighted by its share of the rows, autograd adding each share's gradient to the ones
// before, as the replicas' gradients are added in replica order. Every operator then sees
// the rows it sees on its replica's thread, so no rounding may differ.
TEST_P(ThreadReplicasSum, EqualsOneThreadThroughTheSameSharesBitForBit) {
  const Case c = GetParam();
  const ModelConfig config = small_config(
      {"pos_encoding=rope", "norm=rmsnorm", "mlp=swiglu", "n_embd=" + std::to_string(c.n_embd),
       std::string("tie_weights=") + (c.tied ? "true" : "false")});
  TrainConfig t;
  t.learning_rate = 1e-2;
  GPT one = test::random_model(config), split = test::random_model(config);
  one->train(), split->train();
  AdamW one_optimizer(one, t), split_optimizer(split, t);
  auto rng = at::make_generator<at::CPUGeneratorImpl>(5);
  std::optional<ThreadReplicas> replicas;
  {
    const ThreadCount threads(c.replicas);
    replicas.emplace(split, split_optimizer, c.replicas);
  }
  ASSERT_EQ(replicas->count(), c.replicas);
  const int64_t T = config.block_size;
  for (int step = 0; step < 3; ++step) {
    const torch::Tensor x = torch::randint(config.vocab_size, {c.rows, T}, rng);
    const torch::Tensor y = torch::randint(config.vocab_size, {c.rows, T}, rng);
    double one_loss = 0.0;
    {
      const ThreadCount threads(1);
      for (int64_t r = 0, first = 0; r < c.replicas; ++r) {
        const int64_t count = c.rows / c.replicas + (r < c.rows % c.replicas ? 1 : 0);
        torch::Tensor loss;
        {
          Autocast autocast(c.bfloat16, torch::Device(torch::kCPU));
          loss = next_token_loss(one->forward(x.narrow(0, first, count)), y.narrow(0, first, count))
                     .to(torch::kFloat32) *
                 (static_cast<double>(count) / static_cast<double>(c.rows));
        }
        loss.backward();
        one_loss += loss.item<double>();
        first += count;
      }
    }
    double split_loss = 0.0;
    {
      const ThreadCount threads(c.replicas);
      split_loss = replicas->forward_backward(x, y, 1.0, c.bfloat16);
      replicas->gather_gradients();
    }
    EXPECT_EQ(one_loss, split_loss) << "step " << step;
    EXPECT_TRUE(torch::equal(one_optimizer.sync_buffer(), split_optimizer.sync_buffer()))
        << "step " << step << ": largest difference "
        << (one_optimizer.sync_buffer() - split_optimizer.sync_buffer()).abs().max().item<double>();
    one_optimizer.step(t.learning_rate), split_optimizer.step(t.learning_rate);
    one_optimizer.zero_grad(), split_optimizer.zero_grad();
  }
}

// Micro-batches (gradient accumulation): each replica adds its shares of every micro-batch
// until the gather, which then adds the replicas in order, and the model's parameters keep
// their gradients in the optimizer's buffer. The reference: each replica's sum made alone on
// one thread (autograd adding its second share to its first), the replicas' sums then added
// in order.
TEST(ThreadReplicas, MicroBatchesAccumulateUntilTheGather) {
  const ModelConfig config = small_config({"pos_encoding=rope", "norm=rmsnorm", "mlp=swiglu"});
  TrainConfig t;
  GPT one = test::random_model(config), split = test::random_model(config);
  one->train(), split->train();
  AdamW one_optimizer(one, t), split_optimizer(split, t);
  std::optional<ThreadReplicas> replicas;
  {
    const ThreadCount threads(2);
    replicas.emplace(split, split_optimizer, 2);
  }
  auto rng = at::make_generator<at::CPUGeneratorImpl>(8);
  const int64_t rows = 4, T = config.block_size;
  std::vector<std::pair<torch::Tensor, torch::Tensor>> micro;
  for (int m = 0; m < 2; ++m)
    micro.emplace_back(torch::randint(config.vocab_size, {rows, T}, rng),
                       torch::randint(config.vocab_size, {rows, T}, rng));
  torch::Tensor expected;
  {
    const ThreadCount threads(1);
    for (int64_t r = 0; r < 2; ++r) {
      one_optimizer.zero_grad();
      for (const auto& [x, y] : micro) {
        (next_token_loss(one->forward(x.narrow(0, 2 * r, 2)), y.narrow(0, 2 * r, 2)) * 0.25)
            .backward();
      }
      const torch::Tensor sum = one_optimizer.sync_buffer().clone();
      expected = r == 0 ? sum : expected + sum;
    }
  }
  {
    const ThreadCount threads(2);
    for (const auto& [x, y] : micro) replicas->forward_backward(x, y, 0.5, false);
    replicas->gather_gradients();
  }
  EXPECT_TRUE(torch::equal(split_optimizer.sync_buffer(), expected))
      << "largest difference "
      << (split_optimizer.sync_buffer() - expected).abs().max().item<double>();
  for (const auto& p : split->parameters())
    EXPECT_TRUE(p.grad().defined() && p.grad().is_alias_of(split_optimizer.sync_buffer()));
}

// The loss estimate's batches dealt to the replicas: each batch's loss is the one a thread
// alone computes on the model, in batch order (5 batches over 2 replicas: 3 and 2).
TEST(ThreadReplicas, BatchLossesAreOneThreadsInBatchOrder) {
  const ModelConfig config = small_config({"pos_encoding=rope", "norm=rmsnorm", "mlp=swiglu"});
  GPT model = test::random_model(config);
  TrainConfig t;
  AdamW optimizer(model, t);
  std::optional<ThreadReplicas> replicas;
  {
    const ThreadCount threads(2);
    replicas.emplace(model, optimizer, 2);
  }
  auto rng = at::make_generator<at::CPUGeneratorImpl>(6);
  std::vector<std::pair<torch::Tensor, torch::Tensor>> batches;
  for (int i = 0; i < 5; ++i) {
    batches.emplace_back(torch::randint(config.vocab_size, {3, config.block_size}, rng),
                         torch::randint(config.vocab_size, {3, config.block_size}, rng));
  }
  torch::NoGradGuard no_grad;
  for (const bool bfloat16 : {false, true}) {
    std::vector<double> alone;
    {
      const ThreadCount threads(1);
      Autocast autocast(bfloat16, torch::Device(torch::kCPU));
      for (const auto& [x, y] : batches)
        alone.push_back(next_token_loss(model->forward(x), y).item<double>());
    }
    const ThreadCount threads(2);
    EXPECT_EQ(replicas->batch_losses(batches, bfloat16), alone) << "bfloat16 " << bfloat16;
  }
}

// A replica whose forward throws (a target past the vocabulary in its rows) ends the call with
// its error; the others neither wait for it nor leave a queued product unmade.
TEST(ThreadReplicas, AReplicasErrorEndsTheCallWithNoneLeftWaiting) {
  const ModelConfig config = small_config({"tie_weights=false"});
  GPT model = test::random_model(config);
  model->train();
  TrainConfig t;
  AdamW optimizer(model, t);
  const ThreadCount threads(2);
  ThreadReplicas replicas(model, optimizer, 2);
  const torch::Tensor x = torch::zeros({4, config.block_size}, torch::kInt64);
  torch::Tensor y = torch::zeros({4, config.block_size}, torch::kInt64);
  y[3][0] = config.vocab_size;  // in the second replica's rows
  EXPECT_THROW(replicas.forward_backward(x, y, 1.0, false), c10::Error);
  y[3][0] = 0;  // and the replicas work on
  EXPECT_TRUE(std::isfinite(replicas.forward_backward(x, y, 1.0, false)));
}

// Fewer threads than replicas (--threads 1 after they were made, or a call from inside another
// parallel region): a thread runs several replicas in turn, and the gradients are the same.
TEST(ThreadReplicas, RunOnFewerThreadsThanReplicasToTheSameBits) {
  const ModelConfig config = small_config({"tie_weights=false", "mlp=swiglu"});
  GPT model = test::random_model(config);
  model->train();
  TrainConfig t;
  AdamW optimizer(model, t);
  ThreadReplicas replicas(model, optimizer, 2);
  auto rng = at::make_generator<at::CPUGeneratorImpl>(7);
  const torch::Tensor x = torch::randint(config.vocab_size, {4, config.block_size}, rng);
  const torch::Tensor y = torch::randint(config.vocab_size, {4, config.block_size}, rng);
  std::vector<torch::Tensor> grads;
  for (const int threads : {2, 1}) {
    const ThreadCount count(threads);
    replicas.forward_backward(x, y, 1.0, false);
    replicas.gather_gradients();
    grads.push_back(optimizer.sync_buffer().clone());
    optimizer.zero_grad();
  }
  EXPECT_TRUE(torch::equal(grads[0], grads[1]));
}

TEST(ThreadReplicas, UsedOnlyWhereExactAndWorthIt) {
  TrainConfig t;
  t.batch_size = 4;
  GPT model = test::random_model(small_config());
  {
    const ThreadCount threads(2);
    EXPECT_EQ(thread_replica_count(model, t), 2);
    t.batch_size = 1;  // no row for the second thread
    EXPECT_EQ(thread_replica_count(model, t), 1);
    t.batch_size = 4;
    // Dropout would draw from one generator in whichever order the threads come.
    GPT dropping = test::random_model(small_config({"dropout=0.1"}));
    EXPECT_EQ(thread_replica_count(dropping, t), 1);
    // A hook on the model would not see the other replicas' rows.
    const HookHandle hook = model->add_hook(
        "blocks.0.hook_resid_pre", [](const torch::Tensor& x, const std::string&) { return x; });
    EXPECT_EQ(thread_replica_count(model, t), 1);
  }
  const ThreadCount one(1);
  EXPECT_EQ(thread_replica_count(model, t), 1);
}

}  // namespace
}  // namespace tinylm
