#include "train/estimate_loss.h"

#include "model/scoped_mode.h"
#include "train/autocast.h"
#include "train/run/evaluate.h"

namespace tinylm {

double estimate_loss(GPT& model, const BatchSampler& sampler, int64_t iters,
                     torch::Generator& generator, Dtype dtype, RankGroup* group,
                     ThreadReplicas* replicas) {
  const int world = group ? group->size() : 1, rank = group ? group->rank() : 0;
  const torch::Device device = model->device();
  const ScopedMode eval = eval_mode(*model);
  torch::NoGradGuard no_grad;
  const Autocast autocast(dtype == Dtype::kBfloat16, device);
  std::vector<std::pair<torch::Tensor, torch::Tensor>> mine;  // this rank's batches
  for (int64_t i = 0; i < iters; ++i) {
    const auto [x, y] =
        sampler.sample(generator);  // drawn on every rank: the generator stays in step
    if (i % world == rank) mine.emplace_back(x.to(device), y.to(device));
  }
  double total = 0.0;
  if (replicas) {
    for (const double loss : replicas->batch_losses(mine, dtype == Dtype::kBfloat16)) total += loss;
  } else {
    for (const auto& [x, y] : mine) total += next_token_loss(model->forward(x), y).item<double>();
  }
  if (group) {
    torch::Tensor sum = torch::tensor({total}, torch::kFloat64);
    if (device.is_cuda()) sum = sum.to(device);  // NCCL reduces device tensors only
    group->all_reduce_sum(sum);
    total = sum.item<double>();
  }
  return total / static_cast<double>(iters);
}

}  // namespace tinylm
