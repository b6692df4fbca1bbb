#include "model/analysis/head_scores.h"

#include <stdexcept>

#include "model/activation_cache.h"
#include "model/scoped_mode.h"

namespace tinylm {

const std::vector<std::string>& head_target_names() {
  static const std::vector<std::string> names = {"previous_token", "self", "first_token",
                                                 "duplicate_token", "induction"};
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

HeadScores head_scores(GPT& model, const torch::Tensor& tokens, int64_t induction_from,
                       int64_t batch_size) {
  const int64_t L = model->config().n_layer, nh = model->config().n_head;
  const int64_t N = tokens.size(0), T = tokens.size(1);
  const auto f64 = torch::TensorOptions().dtype(torch::kFloat64);
  std::map<std::string, torch::Tensor> sums;
  std::map<std::string, int64_t> rows;
  for (const std::string& name : head_target_names()) sums[name] = torch::zeros({L, nh}, f64);
  sums["entropy"] = torch::zeros({L, nh}, f64);
  const ScopedMode eval = eval_mode(*model);
  for (int64_t start = 0; start < N; start += batch_size) {
    const torch::Tensor batch = tokens.slice(0, start, std::min(N, start + batch_size));  // (b, T)
    const CachedRun run = run_with_cache(model, batch, names_ending_with("attn.hook_pattern"));
    torch::Tensor induction_rows;
    if (induction_from > 0) {
      induction_rows = (torch::arange(T) >= induction_from).expand({batch.size(0), T});
    }
    std::map<std::string, torch::Tensor> targets;
    for (const std::string& name : head_target_names()) targets[name] = target_matrix(name, batch);
    for (int64_t l = 0; l < L; ++l) {
      const torch::Tensor& pattern = run.cache.at(hook_name(l, "attn.hook_pattern"));
      for (const std::string& name : head_target_names()) {
        const ScoreSum s = score_sum(pattern, targets[name],
                                     name == "induction" ? induction_rows : torch::Tensor());
        sums[name][l] += s.sum;
        if (l == 0) rows[name] += s.rows;
      }
      sums["entropy"][l] += entropy_sum(pattern);
    }
    rows["entropy"] += batch.size(0) * T;
  }
  HeadScores scores;
  scores.sequences = N;
  scores.length = T;
  for (auto& [name, sum] : sums) {
    // A target no row has (no duplicates at all, say) has no score: NaN, not 0.
    scores.values[name] = rows[name] > 0 ? sum / static_cast<double>(rows[name])
                                         : torch::full({L, nh}, std::nan(""), f64);
  }
  return scores;
}

}  // namespace tinylm
