#include "train/train_step.h"

#include <limits>
#include <stdexcept>

#include "train/autocast.h"
#include "train/run/evaluate.h"

namespace tinylm {

void check_batch_splits(const TrainConfig& config, int world_size) {
  const int64_t global = config.batch_size * config.gradient_accumulation_steps;
  if (global % world_size != 0) {
    throw std::invalid_argument(
        "the global batch, train.batch_size x train.gradient_accumulation_steps = " +
        std::to_string(global) + " sequences, does not split evenly over " +
        std::to_string(world_size) + " ranks; make it a multiple of the world size");
  }
}

StepResult train_step(GPT& model, AdamW& optimizer, const TrainConfig& config, double lr,
                      const BatchSource& next_batch, RankGroup* group, bool stop_requested,
                      ThreadReplicas* replicas) {
  const int world = group ? group->size() : 1, rank = group ? group->rank() : 0;
  const torch::Device device = optimizer.sync_buffer().device();
  // The global batch, drawn whole on every rank so that the generators stay in step.
  std::vector<torch::Tensor> xs, ys;
  for (int64_t micro = 0; micro < config.gradient_accumulation_steps; ++micro) {
    auto [x, y] = next_batch();  // (B, T), (B, T)
    xs.push_back(std::move(x)), ys.push_back(std::move(y));
  }
  const torch::Tensor all_x = xs.size() == 1 ? xs[0] : torch::cat(xs);  // (B G, T)
  const torch::Tensor all_y = ys.size() == 1 ? ys[0] : torch::cat(ys);  // (B G, T)
  const int64_t share = all_x.size(0) / world, first = rank * share;

  StepResult result;
  double local_loss = 0.0;
  for (int64_t begin = first; begin < first + share; begin += config.batch_size) {
    const int64_t rows = std::min(config.batch_size, first + share - begin);
    const torch::Tensor x = all_x.narrow(0, begin, rows).to(device, /*non_blocking=*/true);
    const torch::Tensor y = all_y.narrow(0, begin, rows).to(device, /*non_blocking=*/true);
    // Weighted by the micro-batch's share of the slice: 1 / G for equal parts.
    const double weight = static_cast<double>(rows) / static_cast<double>(share);
    if (replicas) {
      local_loss += replicas->forward_backward(x, y, weight, config.dtype == Dtype::kBfloat16);
      continue;
    }
    torch::Tensor loss;
    {
      Autocast autocast(config.dtype == Dtype::kBfloat16, device);
      loss = next_token_loss(model->forward(x), y).to(torch::kFloat32) * weight;
    }
    loss.backward();
    local_loss += loss.item<double>();
  }
  if (replicas) replicas->gather_gradients();
  torch::Tensor& buffer = optimizer.sync_buffer();  // (N + 2,): gradients, loss, stop
  const int64_t n = buffer.size(0) - AdamW::kSideSlots;
  if (group) {
    buffer[n] = local_loss;
    buffer[n + 1] = stop_requested ? 1.0 : 0.0;
    group->all_reduce_sum(buffer);
    buffer.narrow(0, 0, n + 1).div_(world);
    result.loss = buffer[n].item<double>();
    result.stop = buffer[n + 1].item<double>() > 0.0;
  } else {
    result.loss = local_loss;
    result.stop = stop_requested;
  }
  result.grad_norm = optimizer.clip_grad_norm(
      config.grad_clip > 0.0 ? config.grad_clip : std::numeric_limits<double>::infinity());
  optimizer.step(lr);
  optimizer.zero_grad();
  return result;
}

}  // namespace tinylm
