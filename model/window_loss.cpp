#include "model/window_loss.h"

#include <algorithm>
#include <stdexcept>

#include "model/scoped_mode.h"

namespace tinylm {

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
  const int64_t window_bytes =
      to * model->config().vocab_size * static_cast<int64_t>(sizeof(float));
  const int64_t rows = std::max<int64_t>(1, std::min(batch, kWindowLossLogitsBytes / window_bytes));
  WindowLoss loss;
  for (int64_t start = 0; start < windows.size(0); start += rows) {
    const torch::Tensor w =
        windows.slice(0, start, std::min(windows.size(0), start + rows)).to(model->device());
    // Causal: the inputs after `to` change no counted prediction, so they are not run.
    const torch::Tensor logits = model->forward(w.slice(1, 0, to)).slice(1, span.from);
    const torch::Tensor targets = w.slice(1, span.from + 1, to + 1);  // (b, to - from)
    loss.nats += torch::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}),
                                           targets.reshape({-1}), {}, at::Reduction::Sum)
                     .item<double>();
    loss.predictions += targets.numel();
  }
  return loss;
}

}  // namespace tinylm
