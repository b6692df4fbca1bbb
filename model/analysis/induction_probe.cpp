#include "model/analysis/induction_probe.h"

#include <stdexcept>

#include "model/window_loss.h"

namespace tinylm {

torch::Tensor repeated_random_tokens(int64_t count, int64_t R, int64_t vocab,
                                     torch::Generator& generator) {
  if (R < 2) throw std::invalid_argument("the induction probe needs R >= 2 (block_size >= 4)");
  torch::Tensor half = torch::empty({count, R}, torch::kInt64);  // (count, R)
  for (int64_t n = 0; n < count; ++n) {
    if (R <= vocab) {
      half[n].copy_(torch::randperm(vocab, generator, torch::kInt64).slice(0, 0, R));
    } else {
      half[n].copy_(torch::randint(vocab, {R}, generator, torch::kInt64));
    }
  }
  return torch::cat({half, half}, 1);  // (count, 2R)
}

ProbeLosses probe_losses(GPT& model, const torch::Tensor& probe) {
  const int64_t R = probe.size(1) / 2;
  return {window_loss(model, probe, probe.size(0), {0, R - 1}).mean(),
          window_loss(model, probe, probe.size(0), {R, 2 * R - 1}).mean()};
}

ProbeResult run_induction_probe(GPT& model, const torch::Tensor& probe) {
  ProbeResult result;
  const int64_t R = probe.size(1) / 2;
  result.scores = head_scores(model, probe, /*induction_from=*/R);
  result.losses = probe_losses(model, probe);
  return result;
}

}  // namespace tinylm
