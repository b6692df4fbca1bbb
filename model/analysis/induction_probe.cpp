#include "model/analysis/induction_probe.h"

#include <stdexcept>

#include "model/analysis/window_survey.h"

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

torch::Tensor probe_targets(const torch::Tensor& probe) {
  torch::Tensor targets = torch::zeros_like(probe);
  targets.slice(1, 0, probe.size(1) - 1).copy_(probe.slice(1, 1));
  return targets;
}

ProbeLosses probe_losses(const WindowSurvey& survey) {
  const int64_t R = survey.length / 2;
  return {survey.mean_loss({0, R - 1}), survey.mean_loss({R, 2 * R - 1})};
}

ProbeLosses probe_losses(GPT& model, const torch::Tensor& probe) {
  return probe_losses(survey_windows(model, probe, probe_targets(probe), {}));
}

ProbeResult run_induction_probe(GPT& model, const torch::Tensor& probe) {
  SurveyOptions options;
  options.scores = {"previous_token", "induction"};  // what a reading records
  options.induction_from = probe.size(1) / 2;
  const WindowSurvey survey = survey_windows(model, probe, probe_targets(probe), options);
  return {survey.scores, probe_losses(survey)};
}

}  // namespace tinylm
