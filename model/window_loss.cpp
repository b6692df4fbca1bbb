#include "model/window_loss.h"

#include <algorithm>
#include <stdexcept>

#include "model/scoped_mode.h"

namespace tinylm {

int64_t logit_chunk_positions(int64_t vocab_size) {
  return std::max<int64_t>(
      1, kWindowLossLogitsBytes / (vocab_size * static_cast<int64_t>(sizeof(float))));
}

int64_t windows_per_pass(const ModelConfig& config, int64_t T, int64_t batch) {
  const int64_t widest =
      config.mlp == MlpKind::kSwiglu ? 2 * config.swiglu_hidden() : 4 * config.n_embd;
  const int64_t bytes = T * widest * static_cast<int64_t>(sizeof(float));
  return std::max<int64_t>(1, std::min(batch, kWindowLossActivationBytes / bytes));
}

torch::Tensor next_token_losses(const GPT& model, const torch::Tensor& normalized,
                                const torch::Tensor& targets) {
  const int64_t C = normalized.size(-1);
  const torch::Tensor x = normalized.reshape({-1, C});  // (B T, C)
  const torch::Tensor y = targets.reshape({-1}).to(normalized.device());
  torch::Tensor losses = torch::empty({x.size(0)}, normalized.options());
  const int64_t chunk = logit_chunk_positions(model->config().vocab_size);
  for (int64_t start = 0; start < x.size(0); start += chunk) {
    const int64_t end = std::min(x.size(0), start + chunk);
    const torch::Tensor logits = model->unembed(x.slice(0, start, end));  // (chunk, V)
    losses.slice(0, start, end)
        .copy_(torch::cross_entropy_loss(logits, y.slice(0, start, end), {}, at::Reduction::None));
  }
  return losses.view(targets.sizes());
}

WindowLoss window_loss(GPT& model, const torch::Tensor& windows, int64_t batch,
                       PredictionSpan span) {
  const int64_t T = windows.size(1) - 1, to = span.to < 0 ? T : span.to;
  if (span.from < 0 || span.from >= to || to > T) {
    throw std::invalid_argument("window_loss: positions [" + std::to_string(span.from) + ", " +
                                std::to_string(to) + ") are not inside windows of " +
                                std::to_string(T) + " inputs");
  }
  torch::NoGradGuard no_grad;
  const ScopedMode eval = eval_mode(*model);
  const int64_t rows = windows_per_pass(model->config(), to, batch);
  WindowLoss loss;
  for (int64_t start = 0; start < windows.size(0); start += rows) {
    const torch::Tensor w =
        windows.slice(0, start, std::min(windows.size(0), start + rows)).to(model->device());
    // Causal: the inputs after `to` change no counted prediction, so they are not run.
    const torch::Tensor normalized =
        model->forward_from(0, model->embed(w.slice(1, 0, to))).slice(1, span.from);
    const torch::Tensor targets = w.slice(1, span.from + 1, to + 1);  // (b, to - from)
    loss.nats += next_token_losses(model, normalized, targets).sum(torch::kFloat64).item<double>();
    loss.predictions += targets.numel();
  }
  return loss;
}

}  // namespace tinylm
