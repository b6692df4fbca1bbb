#include "model/analysis/head_snapshot.h"

#include "model/activation_cache.h"
#include "model/analysis/head_scores.h"
#include "model/analysis/priors.h"
#include "model/scoped_mode.h"

namespace tinylm {
namespace {

// Each layer's pattern on one row of tokens: (L, nh, T, T).
torch::Tensor patterns(GPT& model, const torch::Tensor& tokens) {
  const CachedRun run = run_with_cache(model, tokens.to(torch::kInt64).unsqueeze(0),
                                       names_ending_with("attn.hook_pattern"));
  std::vector<torch::Tensor> layers;
  for (int64_t l = 0; l < model->config().n_layer; ++l)
    layers.push_back(run.cache.at(hook_name(l, "attn.hook_pattern"))[0].to(torch::kFloat32));
  return torch::stack(layers);
}

// A score of head_scores.h per layer: (L, nh).
torch::Tensor score(const torch::Tensor& pattern, const std::string& target,
                    const torch::Tensor& tokens, const torch::Tensor& rows = {}) {
  std::vector<torch::Tensor> layers;
  const torch::Tensor t = target_matrix(target, tokens.unsqueeze(0));
  for (int64_t l = 0; l < pattern.size(0); ++l) {
    const ScoreSum s = score_sum(pattern[l].unsqueeze(0), t, rows);
    layers.push_back(s.sum / static_cast<double>(std::max<int64_t>(1, s.rows)));
  }
  return torch::stack(layers);
}

}  // namespace

torch::Tensor mean_attention_distance(const torch::Tensor& pattern) {
  const int64_t T = pattern.size(-1);
  const torch::Tensor i = torch::arange(T, torch::kFloat64).unsqueeze(1);
  const torch::Tensor distance = (i - i.t()).clamp_min(0);  // [i, j] = i - j where j <= i
  const torch::Tensor per_row = (pattern.to(torch::kFloat64) * distance).sum(-1);  // (B, nh, T)
  return per_row.mean(std::vector<int64_t>{0, 2});
}

HeadSnapshot snapshot_heads(GPT& model, const torch::Tensor& text, const torch::Tensor& probe) {
  const ScopedMode eval = eval_mode(*model);
  torch::NoGradGuard no_grad;
  HeadSnapshot s;
  s.text_pattern = patterns(model, text);
  s.probe_pattern = patterns(model, probe);
  const int64_t T = text.size(0), R = probe.size(0) / 2;
  std::vector<torch::Tensor> entropy, distance;
  for (int64_t l = 0; l < s.text_pattern.size(0); ++l) {
    entropy.push_back(entropy_sum(s.text_pattern[l].unsqueeze(0)) / static_cast<double>(T));
    distance.push_back(mean_attention_distance(s.text_pattern[l].unsqueeze(0)));
  }
  s.entropy = torch::stack(entropy);
  s.mean_distance = torch::stack(distance);
  s.previous_token = score(s.text_pattern, "previous_token", text);
  s.induction =
      score(s.probe_pattern, "induction", probe, (torch::arange(2 * R) >= R).unsqueeze(0));
  const Priors priors = head_priors(model, 64, /*max_vocab=*/0, /*ov_top1=*/false);
  s.position_pattern = priors.position_pattern;
  s.ov_copying = priors.ov_copying;
  return s;
}

}  // namespace tinylm
