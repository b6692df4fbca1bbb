#include "train/evaluate.h"

#include <stdexcept>

#include <ATen/record_function.h>

#include "model/scoped_mode.h"
#include "model/window_loss.h"

namespace tinylm {

torch::Tensor next_token_loss(const torch::Tensor& logits, const torch::Tensor& targets) {
  RECORD_USER_SCOPE("tinylm::loss");  // a profiler's category (train/step_profile.h)
  return torch::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}), targets.reshape({-1}));
}

namespace {

// Summed nats of one batch of equal-length windows starting at `starts`.
double batch_nats(GPT& model, const TokenSequence& tokens, const std::vector<int64_t>& starts,
                  int64_t T) {
  const auto B = static_cast<int64_t>(starts.size());
  torch::Tensor windows = torch::empty({B, T + 1}, torch::kInt64);  // (B, T + 1)
  for (int64_t b = 0; b < B; ++b) tokens.copy_to(starts[b], T + 1, windows[b].data_ptr<int64_t>());
  return window_loss(model, windows, B).nats;
}

}  // namespace

Score score_tokens(GPT& model, const TokenSequence& t, int64_t windows_per_batch, int64_t context) {
  const int64_t N = t.size();
  if (N < 2)
    throw std::invalid_argument("scoring needs at least 2 tokens (got " + std::to_string(N) + ")");
  const int64_t T = context > 0 ? context : model->config().block_size;
  const int64_t predicted = N - 1, full = predicted / T, tail = predicted % T;
  double nats = 0.0;
  std::vector<int64_t> starts;
  for (int64_t w = 0; w < full; ++w) {
    starts.push_back(w * T);
    if (static_cast<int64_t>(starts.size()) == windows_per_batch || w == full - 1) {
      nats += batch_nats(model, t, starts, T);
      starts.clear();
    }
  }
  if (tail > 0) nats += batch_nats(model, t, {full * T}, tail);
  return {nats / static_cast<double>(predicted), predicted};
}

double estimate_loss(GPT& model, const BatchSampler& sampler, int64_t iters,
                     torch::Generator& generator, RankGroup* group) {
  const int world = group ? group->size() : 1, rank = group ? group->rank() : 0;
  const torch::Device device = model->device();
  const ScopedMode eval = eval_mode(*model);
  torch::NoGradGuard no_grad;
  double total = 0.0;
  for (int64_t i = 0; i < iters; ++i) {
    const auto [x, y] =
        sampler.sample(generator);  // drawn on every rank: the generator stays in step
    if (i % world != rank) continue;
    total += next_token_loss(model->forward(x.to(device)), y.to(device)).item<double>();
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
