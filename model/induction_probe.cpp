#include "model/induction_probe.h"

#include <stdexcept>

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

ProbeLosses probe_losses(const torch::Tensor& logits, const torch::Tensor& probe) {
  const int64_t R = probe.size(1) / 2;
  const auto mean_loss = [&](int64_t from, int64_t to) {  // predictions made at [from, to)
    const torch::Tensor l = logits.slice(1, from, to);                    // (n, t, V)
    const torch::Tensor y = probe.slice(1, from + 1, to + 1);             // (n, t)
    return torch::nn::functional::cross_entropy(l.reshape({-1, l.size(-1)}), y.reshape(-1))
        .item<double>();
  };
  return {mean_loss(0, R - 1), mean_loss(R, 2 * R - 1)};
}

ProbeResult run_induction_probe(GPT& model, const torch::Tensor& probe) {
  ProbeResult result;
  const int64_t R = probe.size(1) / 2;
  result.scores = head_scores(model, probe, /*induction_from=*/R);
  torch::NoGradGuard no_grad;
  const bool was_training = model->is_training();
  model->eval();
  result.losses = probe_losses(model->forward(probe), probe);
  if (was_training) model->train();
  return result;
}

}  // namespace tinylm
