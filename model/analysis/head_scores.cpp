#include "model/analysis/head_scores.h"

#include <stdexcept>

#include "model/analysis/window_survey.h"

namespace tinylm {

const std::vector<std::string>& head_target_names() {
  static const std::vector<std::string> names = {"previous_token", "self", "first_token",
                                                 "duplicate_token", "induction"};
  return names;
}

const std::vector<std::string>& head_score_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> all = head_target_names();
    all.push_back("entropy");
    return all;
  }();
  return names;
}

torch::Tensor target_matrix(const std::string& target, const torch::Tensor& tokens) {
  const int64_t B = tokens.size(0), T = tokens.size(1);
  const auto f32 = torch::TensorOptions().dtype(torch::kFloat32);
  const torch::Tensor below = torch::ones({T, T}, f32).tril(-1);  // j < i
  if (target == "previous_token") return torch::eye(T, f32).roll(-1, 1).tril(-1).expand({B, T, T});
  if (target == "self") return torch::eye(T, f32).expand({B, T, T});
  if (target == "first_token") {
    torch::Tensor p = torch::zeros({T, T}, f32);
    p.select(1, 0).fill_(1.0);
    return p.expand({B, T, T});
  }
  if (target == "duplicate_token") {
    const torch::Tensor same = tokens.unsqueeze(2) == tokens.unsqueeze(1);  // (B, T, T) [i, j]
    return same.to(torch::kFloat32) * below;
  }
  if (target == "induction") {
    // j >= 1 and tok[j - 1] = tok[i]: compare each row's token with the token before column j.
    torch::Tensor before = torch::full({B, T}, -1, tokens.options());  // tok[j - 1], none at j = 0
    before.slice(1, 1, T).copy_(tokens.slice(1, 0, T - 1));
    const torch::Tensor match = tokens.unsqueeze(2) == before.unsqueeze(1);  // (B, T, T)
    return match.to(torch::kFloat32) * below;
  }
  throw std::invalid_argument("unknown head score target \"" + target + "\"");
}

ScoreSum score_sum(const torch::Tensor& pattern, const torch::Tensor& target,
                   const torch::Tensor& rows) {
  torch::Tensor counted = target.sum(-1) > 0;  // (B, T)
  if (rows.defined()) counted = counted & rows;
  const torch::Tensor mass =
      (pattern.to(torch::kFloat64) * target.unsqueeze(1)).sum(-1);  // (B, nh, T)
  const torch::Tensor selected = mass * counted.unsqueeze(1);
  return {selected.sum(std::vector<int64_t>{0, 2}), counted.sum().item<int64_t>()};
}

torch::Tensor entropy_sum(const torch::Tensor& pattern) {
  const torch::Tensor a = pattern.to(torch::kFloat64);
  return -torch::xlogy(a, a).sum(-1).sum(std::vector<int64_t>{0, 2});  // 0 log 0 = 0
}

HeadScores head_scores(GPT& model, const torch::Tensor& tokens, int64_t induction_from) {
  SurveyOptions options;
  options.scores = head_score_names();
  options.induction_from = induction_from;
  return survey_windows(model, tokens, {}, options).scores;
}

}  // namespace tinylm
