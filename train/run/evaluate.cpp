#include "train/run/evaluate.h"

#include <stdexcept>

#include <ATen/record_function.h>

#include "model/kernels/cross_entropy.h"
#include "model/kernels/kernel_choice.h"
#include "model/scoped_mode.h"
#include "model/window_loss.h"

namespace tinylm {

torch::Tensor next_token_loss(const torch::Tensor& logits, const torch::Tensor& targets) {
  RECORD_USER_SCOPE("tinylm::loss");  // a profiler's category (train/step_profile.h)
  const torch::Tensor rows = logits.reshape({-1, logits.size(-1)}), t = targets.reshape({-1});
  if (fused_kernel_takes(rows) && t.scalar_type() == torch::kLong && t.device().is_cpu())
    return fused_cross_entropy(rows, t);
  return torch::cross_entropy_loss(rows, t);
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

int64_t window_context(const ModelConfig& c, int64_t context, const std::string& run) {
  if (context <= 0) return c.block_size;
  if (context > c.block_size && !c.positions().extrapolates) {
    throw std::runtime_error(
        "--context " + std::to_string(context) + " is past model.block_size " +
        std::to_string(c.block_size) + " of " + run +
        ", whose learned positions (model.pos_encoding = \"learned\") have no vector past "
        "position " +
        std::to_string(c.block_size - 1) + "; use --context " + std::to_string(c.block_size) +
        " or less, or train with sinusoidal, rope, relative, alibi or none");
  }
  return context;
}

}  // namespace tinylm
