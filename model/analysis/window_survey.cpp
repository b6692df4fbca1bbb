#include "model/analysis/window_survey.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/analysis/stream_gradients.h"
#include "model/scoped_mode.h"

namespace tinylm {

double WindowSurvey::mean_loss(PredictionSpan span) const {
  const int64_t to = span.to < 0 ? length : span.to;
  return position_nats.slice(0, span.from, to).sum().item<double>() /
         static_cast<double>(rows * (to - span.from));
}

torch::Tensor WindowSurvey::z_mean() const {
  return (z_sum / static_cast<double>(rows * length)).to(torch::kFloat32);
}

int64_t survey_rows(const ModelConfig& c, int64_t T, bool gradients) {
  const int64_t f32 = sizeof(float);
  const int64_t pattern = c.n_head * T * T * f32;  // one layer's (nh, T, T)
  const int64_t stream =
      T * (c.mlp == MlpKind::kSwiglu ? 2 * c.swiglu_hidden() : 4 * c.n_embd) * f32;
  // Without gradients one layer's pattern lives at a time (and the scores' float64 copies).
  int64_t per_window = 6 * pattern + 4 * stream;
  // With them, what the backward keeps: the fused attention's pattern and the activations.
  if (gradients) per_window = std::max(per_window, c.n_layer * (pattern + 8 * stream));
  return std::clamp<int64_t>(kSurveyBytes / per_window, 1, 32);
}

WindowSurvey survey_windows(GPT& model, const torch::Tensor& inputs, const torch::Tensor& targets,
                            const SurveyOptions& o) {
  const ModelConfig& c = model->config();
  const int64_t L = c.n_layer, nh = c.n_head, hs = c.n_embd / c.n_head;
  const int64_t N = inputs.size(0), T = inputs.size(1);
  if (o.attribution && !targets.defined())
    throw std::invalid_argument("survey_windows: attribution needs the windows' targets");
  const int64_t span_to = o.span.to < 0 ? T : o.span.to;
  const auto f64 = torch::TensorOptions().dtype(torch::kFloat64);
  const ScopedMode eval = eval_mode(*model);
  torch::NoGradGuard no_grad;

  WindowSurvey s;
  s.rows = N;
  s.length = T;
  std::map<std::string, torch::Tensor> sums;
  std::map<std::string, int64_t> counted;
  for (const std::string& name : o.scores) {
    const auto& known = head_score_names();
    if (std::find(known.begin(), known.end(), name) == known.end() || sums.count(name) != 0)
      throw std::invalid_argument("survey_windows: head score \"" + name +
                                  "\" is unknown or asked twice");
    sums[name] = torch::zeros({L, nh}, f64);
  }
  if (targets.defined()) s.position_nats = torch::zeros({T}, f64);
  if (o.head_outputs || o.attribution) s.z_sum = torch::zeros({L, nh, hs}, f64);
  if (o.attribution) {
    s.grad_sum = torch::zeros({L, nh, hs}, f64);
    s.grad_dot_z = torch::zeros({L, nh}, f64);
  }
  // The attribution's objective: the mean loss over every window's counted predictions.
  const double predictions = static_cast<double>(N * (span_to - o.span.from));

  const int64_t step = survey_rows(c, T, o.attribution);
  for (int64_t start = 0; start < N; start += step) {
    const int64_t end = std::min(N, start + step), b = end - start;
    const torch::Tensor x = inputs.slice(0, start, end).to(model->device());
    const torch::Tensor y = targets.defined() ? targets.slice(0, start, end) : torch::Tensor();

    StreamGradients grads;
    if (o.attribution) {
      grads = stream_gradients(model, x, [&](const torch::Tensor& normalized) {
        const torch::Tensor counted_out = normalized.slice(1, o.span.from, span_to);
        return next_token_losses(model, counted_out, y.slice(1, o.span.from, span_to)).sum() /
               predictions;
      });
    }

    std::map<std::string, torch::Tensor> target_of;
    torch::Tensor induction_rows;
    for (const std::string& name : o.scores)
      if (name != "entropy") target_of[name] = target_matrix(name, x);
    if (o.induction_from > 0 && sums.count("induction") != 0)
      induction_rows = (torch::arange(T) >= o.induction_from).expand({b, T});
    std::vector<HookHandle> reads;
    for (int64_t l = 0; l < L; ++l) {
      if (!o.scores.empty()) {
        reads.push_back(model->add_hook(
            hook_name(l, "attn.hook_pattern"), [&, l](const torch::Tensor& p, const std::string&) {
              const torch::Tensor p64 = p.to(torch::kFloat64);  // once, not once per score
              for (const std::string& name : o.scores) {
                if (name == "entropy") {
                  sums[name][l] += entropy_sum(p64);
                  if (l == 0) counted[name] += b * T;
                  continue;
                }
                const ScoreSum sum = score_sum(
                    p64, target_of[name], name == "induction" ? induction_rows : torch::Tensor());
                sums[name][l] += sum.sum;
                if (l == 0) counted[name] += sum.rows;
              }
              return p;
            }));
      }
      if (s.z_sum.defined()) {
        reads.push_back(model->add_hook(
            hook_name(l, "attn.hook_z"), [&, l](const torch::Tensor& z, const std::string&) {
              const torch::Tensor z64 = z.to(torch::kFloat64);  // (b, nh, T, hs)
              s.z_sum[l] += z64.sum(std::vector<int64_t>{0, 2});
              if (o.attribution) {
                const torch::Tensor g =
                    head_output_gradient(model, l, grads.attn_out.grad[static_cast<size_t>(l)])
                        .to(torch::kFloat64);
                s.grad_sum[l] += g.sum(std::vector<int64_t>{0, 2});
                s.grad_dot_z[l] += (g * z64).sum(std::vector<int64_t>{0, 2, 3});
              }
              return z;
            }));
      }
    }
    const torch::Tensor normalized = model->forward_from(0, model->embed(x));
    reads.clear();
    if (targets.defined())
      s.position_nats += next_token_losses(model, normalized, y).to(torch::kFloat64).sum(0);
  }
  if (!o.scores.empty()) {
    s.scores.sequences = N;
    s.scores.length = T;
    for (auto& [name, sum] : sums) {
      // A target no row has (no duplicates at all, say) has no score: NaN, not 0.
      s.scores.values[name] = counted[name] > 0 ? sum / static_cast<double>(counted[name])
                                                : torch::full({L, nh}, std::nan(""), f64);
    }
  }
  return s;
}

}  // namespace tinylm
