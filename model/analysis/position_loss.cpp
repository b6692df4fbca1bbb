#include "model/analysis/position_loss.h"

#include "model/scoped_mode.h"

namespace tinylm {

PositionLoss loss_by_position(GPT& model, const torch::Tensor& windows, int64_t max_buckets,
                              int64_t batch) {
  torch::NoGradGuard no_grad;
  const ScopedMode eval = eval_mode(*model);
  const int64_t n = windows.size(0), N = windows.size(1) - 1;
  torch::Tensor sum = torch::zeros({N}, torch::kFloat64);
  for (int64_t start = 0; start < n; start += batch) {
    const torch::Tensor w = windows.slice(0, start, std::min(n, start + batch)).to(model->device());
    const torch::Tensor logits = model->forward(w.slice(1, 0, N)).to(torch::kFloat32);  // (b, N, V)
    const torch::Tensor nats = torch::nn::functional::cross_entropy(
        logits.reshape({-1, logits.size(-1)}), w.slice(1, 1).reshape(-1),
        torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone));
    sum += nats.view({-1, N}).to(torch::kCPU, torch::kFloat64).sum(0);
  }
  PositionLoss out;
  out.windows = n;
  out.per_position = sum / static_cast<double>(n);
  const int64_t width = (N + max_buckets - 1) / max_buckets;
  std::vector<int64_t> starts;
  std::vector<double> means;
  for (int64_t from = 0; from < N; from += width) {
    starts.push_back(from);
    means.push_back(
        out.per_position.slice(0, from, std::min(N, from + width)).mean().item<double>());
  }
  out.bucket_start = torch::tensor(starts, torch::kInt64);
  out.bucket_loss = torch::tensor(means, torch::kFloat64);
  return out;
}

}  // namespace tinylm
