#include "train/run/phase_change.h"

#include <algorithm>
#include <array>

#include <fmt/format.h>

namespace tinylm {
namespace {

using json = nlohmann::json;

// The median of the values at i - 1, i and i + 1 of n, or, `causal`, at i - 2, i - 1 and i
// (fewer at the ends): detection reads the causal one, so that the last reading decides, and
// the description the centred one, which does not lag.
template <class Value>
double median3(size_t i, size_t n, bool causal, Value&& value) {
  const size_t last = causal ? i : std::min(i + 1, n - 1);
  std::array<double, 3> v{};
  size_t k = 0;
  for (size_t j = last >= 2 ? last - 2 : 0; j <= last; ++j) v[k++] = value(j);
  std::sort(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k));
  return k == 2 ? (v[0] + v[1]) / 2.0 : v[k / 2];
}

json head_json(const FormedHead& h) {
  return {{"layer", h.layer}, {"head", h.head}, {"score", h.score}, {"half_step", h.half_step}};
}

FormedHead head_from_json(const json& doc) {
  return {doc.at("layer").get<int64_t>(), doc.at("head").get<int64_t>(),
          doc.at("score").get<double>(), doc.at("half_step").get<int64_t>()};
}

json steps_json(const torch::Tensor& steps) {
  json rows = json::array();
  for (int64_t l = 0; l < steps.size(0); ++l) {
    json row = json::array();
    for (int64_t h = 0; h < steps.size(1); ++h) row.push_back(steps[l][h].item<int64_t>());
    rows.push_back(row);
  }
  return rows;
}

torch::Tensor steps_from_json(const json& rows) {
  std::vector<int64_t> flat;
  for (const json& row : rows)
    for (const json& v : row) flat.push_back(v.get<int64_t>());
  const int64_t L = static_cast<int64_t>(rows.size());
  return torch::tensor(flat, torch::kInt64).view({L, L == 0 ? 0 : -1});
}

}  // namespace

std::string PhaseChange::summary() const {
  return fmt::format(
      "phase change at step {}: loss fell {:.2f} nats in {} steps; {}.{} previous-token, {}.{} "
      "induction formed",
      step, drop, end - start, previous_token.layer, previous_token.head, induction.layer,
      induction.head);
}

json PhaseChange::to_json() const {
  return {{"start", start},
          {"step", step},
          {"end", end},
          {"drop", drop},
          {"gap", gap},
          {"previous_token", head_json(previous_token)},
          {"induction", head_json(induction)},
          {"half_steps",
           {{"previous_token", steps_json(previous_token_steps)},
            {"induction", steps_json(induction_steps)}}}};
}

PhaseChange PhaseChange::from_json(const json& doc) {
  PhaseChange p;
  p.start = doc.at("start").get<int64_t>();
  p.step = doc.at("step").get<int64_t>();
  p.end = doc.at("end").get<int64_t>();
  p.drop = doc.at("drop").get<double>();
  p.gap = doc.at("gap").get<double>();
  p.previous_token = head_from_json(doc.at("previous_token"));
  p.induction = head_from_json(doc.at("induction"));
  p.previous_token_steps = steps_from_json(doc.at("half_steps").at("previous_token"));
  p.induction_steps = steps_from_json(doc.at("half_steps").at("induction"));
  return p;
}

double PhaseChangeDetector::smoothed_gap(size_t i, bool causal) const {
  return median3(i, readings_.size(), causal,
                 [&](size_t j) { return readings_[j].first_half - readings_[j].second_half; });
}

double PhaseChangeDetector::smoothed_second_half(size_t i) const {
  return median3(i, readings_.size(), false, [&](size_t j) { return readings_[j].second_half; });
}

std::optional<PhaseChange> PhaseChangeDetector::add(ProbeReading reading) {
  readings_.push_back(std::move(reading));
  const size_t n = readings_.size(), w = static_cast<size_t>(kSettle);
  // A causal median never changes once made: the low, the high after it and the fastest
  // rise follow it reading by reading.
  gaps_.push_back(smoothed_gap(n - 1, true));
  if (gaps_[n - 1] < gaps_[low_]) {
    low_ = high_ = n - 1;
  } else if (gaps_[n - 1] > gaps_[high_]) {
    high_ = n - 1;
  }
  if (n > w) fastest_ = std::max(fastest_, gaps_[n - 1] - gaps_[n - 1 - w]);
  if (found_) return std::nullopt;
  const double rise = gaps_[high_] - gaps_[low_];
  // Settled: near the high, and rising over the last kSettle readings at less than a fifth
  // of the fastest rise over as many readings so far.
  if (rise < kMinRise || n <= w || gaps_[n - 1] < gaps_[high_] - 0.1 * rise) return std::nullopt;
  if (gaps_[n - 1] - gaps_[n - 1 - w] >= fastest_ / 5.0) return std::nullopt;
  found_ = describe();
  return found_;
}

// The rise again from the centred medians: its low and the high after it place the step
// half way up; the plateau is the median level before that step, and the drop runs from the
// last reading a tenth of the way up from the plateau to the first a tenth below the high.
PhaseChange PhaseChangeDetector::describe() const {
  const size_t n = readings_.size();
  std::vector<double> gap(n);
  for (size_t i = 0; i < n; ++i) gap[i] = smoothed_gap(i, false);
  const size_t low = static_cast<size_t>(std::min_element(gap.begin(), gap.end()) - gap.begin());
  const size_t high = static_cast<size_t>(
      std::max_element(gap.begin() + static_cast<std::ptrdiff_t>(low), gap.end()) - gap.begin());
  size_t middle = low;
  while (middle < high && gap[middle] < (gap[low] + gap[high]) / 2.0) ++middle;
  std::vector<double> before(gap.begin(), gap.begin() + static_cast<std::ptrdiff_t>(middle) + 1);
  std::nth_element(before.begin(), before.begin() + static_cast<std::ptrdiff_t>(before.size() / 2),
                   before.end());
  const double plateau = before[before.size() / 2], rise = gap[high] - plateau;
  size_t start = middle, end = middle;
  while (start > 0 && gap[start] > plateau + 0.1 * rise) --start;
  while (end < high && gap[end] < gap[high] - 0.1 * rise) ++end;
  PhaseChange p;
  p.start = readings_[start].step;
  p.step = readings_[middle].step;
  p.end = readings_[end].step;
  p.drop = smoothed_second_half(start) - smoothed_second_half(end);
  p.gap = gap[n - 1];
  // Each head's first step at half its score now.
  const auto half_steps = [&](torch::Tensor ProbeReading::*scores) {
    const torch::Tensor last = (readings_.back().*scores).to(torch::kFloat64);
    torch::Tensor steps = torch::full(last.sizes(), -1, torch::kInt64);
    for (int64_t l = 0; l < last.size(0); ++l) {
      for (int64_t h = 0; h < last.size(1); ++h) {
        const double half = 0.5 * last[l][h].item<double>();
        if ((readings_.front().*scores)[l][h].item<double>() >= half) continue;
        for (const ProbeReading& r : readings_) {
          if ((r.*scores)[l][h].item<double>() >= half) {
            steps[l][h] = r.step;
            break;
          }
        }
      }
    }
    return std::make_pair(last, steps);
  };
  const auto top = [](const torch::Tensor& last, const torch::Tensor& steps) {
    const int64_t i = last.flatten().argmax().item<int64_t>(), nh = last.size(1);
    return FormedHead{i / nh, i % nh, last.flatten()[i].item<double>(),
                      steps.flatten()[i].item<int64_t>()};
  };
  const auto [prev_last, prev_steps] = half_steps(&ProbeReading::previous_token);
  const auto [ind_last, ind_steps] = half_steps(&ProbeReading::induction);
  p.previous_token = top(prev_last, prev_steps);
  p.induction = top(ind_last, ind_steps);
  p.previous_token_steps = prev_steps;
  p.induction_steps = ind_steps;
  return p;
}

std::string PhaseChangeDetector::none_summary() const {
  if (readings_.empty()) return "no phase change: the induction probe never ran";
  return fmt::format("no phase change by step {}: the repeat is worth {:.2f} nats",
                     readings_.back().step, gaps_.back());
}

}  // namespace tinylm
