#include "model/analysis/ablation.h"

#include <algorithm>
#include <stdexcept>

#include <cmath>
#include <map>

#include "model/analysis/induction_probe.h"
#include "model/scoped_mode.h"
#include "model/window_loss.h"

namespace tinylm {
std::vector<HeadRef> parse_head_list(const std::string& text) {
  std::vector<HeadRef> heads;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, comma - start);
    const size_t dot = item.find('.');
    const auto is_number = [](const std::string& s) {
      return !s.empty() && s.size() < 9 &&
             std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
    };
    if (dot == std::string::npos || !is_number(item.substr(0, dot)) ||
        !is_number(item.substr(dot + 1))) {
      throw std::invalid_argument("bad head \"" + item + "\" in \"" + text +
                                  "\": write LAYER.HEAD, e.g. 0.3, and separate heads with commas");
    }
    heads.push_back({std::stoll(item.substr(0, dot)), std::stoll(item.substr(dot + 1))});
    start = comma + 1;
  }
  return heads;
}

void check_heads(const ModelConfig& config, const std::vector<HeadRef>& heads) {
  for (const HeadRef& h : heads) {
    if (h.layer >= config.n_layer || h.head >= config.n_head) {
      throw std::invalid_argument("head " + h.label() + " is not in this model: layers are 0-" +
                                  std::to_string(config.n_layer - 1) + " and heads 0-" +
                                  std::to_string(config.n_head - 1));
    }
  }
}

HookHandle ablate_head(GPT& model, HeadRef head, torch::Tensor value) {
  check_heads(model->config(), {head});
  return model->add_hook(hook_name(head.layer, "attn.hook_z"),
                         [head, value](const torch::Tensor& z, const std::string&) {
                           torch::Tensor out = z.clone();                  // (B, nh, T, hs)
                           torch::Tensor slot = out.select(1, head.head);  // (B, T, hs)
                           if (value.defined()) {
                             slot.copy_(value.to(z.dtype()).expand_as(slot));
                           } else {
                             slot.zero_();
                           }
                           return out;
                         });
}

std::vector<HookHandle> zero_ablate(GPT& model, const std::vector<HeadRef>& heads) {
  check_heads(model->config(), heads);
  std::vector<HookHandle> handles;
  for (const HeadRef& h : heads) handles.push_back(ablate_head(model, h));
  return handles;
}

torch::Tensor mean_head_outputs(GPT& model, const torch::Tensor& tokens) {
  SurveyOptions options;
  options.head_outputs = true;
  return survey_windows(model, tokens, {}, options).z_mean();
}

SurveyOptions ablation_survey_options(bool of_probe, int64_t probe_length) {
  SurveyOptions o;
  o.head_outputs = true;
  o.attribution = true;
  if (of_probe) o.span = {probe_length / 2, probe_length - 1};  // the second half's predictions
  return o;
}

std::vector<std::pair<double, double>> exact_ablations(GPT& model, const torch::Tensor& inputs,
                                                       const torch::Tensor& targets,
                                                       PredictionSpan span,
                                                       const std::vector<HeadRef>& heads,
                                                       const torch::Tensor& means, double* clean) {
  const ModelConfig& c = model->config();
  const int64_t N = inputs.size(0), to = span.to < 0 ? inputs.size(1) : span.to;
  // Causal: inputs after the last counted prediction change nothing counted.
  const torch::Tensor x_all = inputs.slice(1, 0, to), y_all = targets.slice(1, span.from, to);
  std::map<int64_t, std::vector<size_t>> by_layer;  // layer -> indices into heads
  for (size_t i = 0; i < heads.size(); ++i) by_layer[heads[i].layer].push_back(i);
  std::vector<std::pair<double, double>> nats(heads.size(), {0.0, 0.0});
  double clean_nats = 0.0;
  const ScopedMode eval = eval_mode(*model);
  torch::NoGradGuard no_grad;
  // Rows through the blocks at once: windows of one prefix pass, and ablated copies of them.
  const int64_t rows = std::min(windows_per_pass(c, to, 32), survey_rows(c, to, false));
  const auto counted_nats = [&](const torch::Tensor& normalized, const torch::Tensor& y) {
    return next_token_losses(model, normalized.slice(1, span.from), y).to(torch::kFloat64);
  };
  for (int64_t start = 0; start < N; start += rows) {
    const int64_t end = std::min(N, start + rows), b = end - start;
    const torch::Tensor x = x_all.slice(0, start, end).to(model->device());
    const torch::Tensor y = y_all.slice(0, start, end);
    std::map<int64_t, torch::Tensor> prefix;  // layer -> its resid_pre (b, T, C)
    std::vector<HookHandle> reads;
    for (const auto& [layer, _] : by_layer) {
      reads.push_back(
          model->add_hook(hook_name(layer, "hook_resid_pre"),
                          [&prefix, layer = layer](const torch::Tensor& r, const std::string&) {
                            prefix[layer] = r;
                            return r;
                          }));
    }
    clean_nats += counted_nats(model->forward_from(0, model->embed(x)), y).sum().item<double>();
    reads.clear();
    for (const auto& [layer, layer_heads] : by_layer) {
      const std::vector<size_t>& members = layer_heads;  // C++17 lambdas cannot capture a binding
      // Variants 2i (head i zeroed) and 2i + 1 (its mean), b rows each, a pass at a time.
      const int64_t variants = 2 * static_cast<int64_t>(members.size());
      const int64_t per_pass = std::max<int64_t>(1, rows / b);
      for (int64_t v0 = 0; v0 < variants; v0 += per_pass) {
        const int64_t v1 = std::min(variants, v0 + per_pass), nv = v1 - v0;
        const HookHandle ablate = model->add_hook(
            hook_name(layer, "attn.hook_z"), [&](const torch::Tensor& z, const std::string&) {
              torch::Tensor out = z.clone();  // (nv b, nh, T, hs)
              for (int64_t v = v0; v < v1; ++v) {
                const HeadRef& h = heads[members[static_cast<size_t>(v / 2)]];
                torch::Tensor slot = out.slice(0, (v - v0) * b, (v - v0 + 1) * b).select(1, h.head);
                if (v % 2 == 0) {
                  slot.zero_();
                } else {
                  slot.copy_(means[h.layer][h.head].to(z.dtype()).expand_as(slot));
                }
              }
              return out;
            });
        const torch::Tensor normalized =
            model->forward_from(layer, prefix.at(layer).repeat({nv, 1, 1}));
        const torch::Tensor per_variant =
            counted_nats(normalized, y.repeat({nv, 1})).view({nv, -1}).sum(1);  // (nv,)
        for (int64_t v = v0; v < v1; ++v) {
          auto& [zero, mean] = nats[members[static_cast<size_t>(v / 2)]];
          (v % 2 == 0 ? zero : mean) += per_variant[v - v0].item<double>();
        }
      }
    }
  }
  const double predictions = static_cast<double>(N * (to - span.from));
  if (clean) *clean = clean_nats / predictions;
  for (auto& [zero, mean] : nats) zero /= predictions, mean /= predictions;
  return nats;
}

AblationTable ablation_table(GPT& model, const torch::Tensor& windows, const torch::Tensor& probe,
                             int64_t exact, const WindowSurvey* windows_survey,
                             const WindowSurvey* probe_survey) {
  const ModelConfig& c = model->config();
  const int64_t L = c.n_layer, nh = c.n_head, T = windows.size(1) - 1;
  const torch::Tensor inputs = windows.slice(1, 0, T), targets = windows.slice(1, 1, T + 1);
  const torch::Tensor probe_y = probe_targets(probe);
  WindowSurvey own_windows, own_probe;
  if (!windows_survey) {
    own_windows = survey_windows(model, inputs, targets, ablation_survey_options(false, 0));
    windows_survey = &own_windows;
  }
  if (!probe_survey) {
    own_probe = survey_windows(model, probe, probe_y, ablation_survey_options(true, probe.size(1)));
    probe_survey = &own_probe;
  }
  const torch::Tensor means = windows_survey->z_mean();  // (L, nh, hs)
  const auto estimate = [&](const WindowSurvey& s, int64_t l, int64_t h) {
    const double dot = s.grad_dot_z[l][h].item<double>();
    const double towards_mean =
        (s.grad_sum[l][h] * means[l][h].to(torch::kFloat64)).sum().item<double>();
    return std::make_pair(-dot, towards_mean - dot);
  };
  AblationTable table;
  table.loss = windows_survey->mean_loss();
  table.probe_loss = probe_losses(*probe_survey).second_half;
  const double nan = std::nan("");
  for (int64_t l = 0; l < L; ++l) {
    for (int64_t h = 0; h < nh; ++h) {
      HeadAblation row{{l, h}, false, nan, nan, nan, nan, {}};
      std::tie(row.estimate.zero, row.estimate.mean) = estimate(*windows_survey, l, h);
      std::tie(row.estimate.probe_zero, row.estimate.probe_mean) = estimate(*probe_survey, l, h);
      table.heads.push_back(row);
    }
  }
  // The heads to run: those whose largest estimated change is largest.
  const auto reach = [](const AblationEstimate& e) {
    return std::max(
        {std::abs(e.zero), std::abs(e.mean), std::abs(e.probe_zero), std::abs(e.probe_mean)});
  };
  std::stable_sort(table.heads.begin(), table.heads.end(),
                   [&](const HeadAblation& a, const HeadAblation& b) {
                     return reach(a.estimate) > reach(b.estimate);
                   });
  const int64_t n_exact = exact < 0 ? L * nh : std::min(exact, L * nh);
  std::vector<HeadRef> chosen;
  for (int64_t i = 0; i < n_exact; ++i) chosen.push_back(table.heads[static_cast<size_t>(i)].head);
  if (!chosen.empty()) {
    double loss = 0.0, probe_loss = 0.0;
    const auto on_windows = exact_ablations(model, inputs, targets, {}, chosen, means, &loss);
    const int64_t R = probe.size(1) / 2;
    const auto on_probe =
        exact_ablations(model, probe, probe_y, {R, 2 * R - 1}, chosen, means, &probe_loss);
    // The exact rows' changes are against the exact runs' own unablated losses.
    table.loss = loss;
    table.probe_loss = probe_loss;
    for (size_t i = 0; i < chosen.size(); ++i) {
      HeadAblation& row = table.heads[i];
      row.exact = true;
      row.zero = on_windows[i].first - loss;
      row.mean = on_windows[i].second - loss;
      row.probe_zero = on_probe[i].first - probe_loss;
      row.probe_mean = on_probe[i].second - probe_loss;
    }
  }
  std::stable_sort(table.heads.begin(), table.heads.end(),
                   [](const HeadAblation& a, const HeadAblation& b) {
                     if (a.exact != b.exact) return a.exact;
                     return a.exact ? a.zero > b.zero : a.estimate.zero > b.estimate.zero;
                   });
  std::vector<double> exact_values[4], estimates[4];
  for (const HeadAblation& row : table.heads) {
    if (!row.exact) continue;
    const double e[4] = {row.zero, row.mean, row.probe_zero, row.probe_mean};
    const double a[4] = {row.estimate.zero, row.estimate.mean, row.estimate.probe_zero,
                         row.estimate.probe_mean};
    for (int i = 0; i < 4; ++i) exact_values[i].push_back(e[i]), estimates[i].push_back(a[i]);
  }
  for (int i = 0; i < 4; ++i)
    table.agreement.push_back(rank_agreement(exact_values[i], estimates[i], 3));
  return table;
}

}  // namespace tinylm
