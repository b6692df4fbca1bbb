#pragma once
// Ablation: take a head out and see what the model loses. A head is ablated at
// blocks.L.attn.hook_z, its output before c_proj: zeroed, or replaced by its mean over the
// data. The hooks last as long as their handles.

#include <cstdint>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "model/analysis/rank_agreement.h"
#include "model/analysis/window_survey.h"
#include "model/gpt.h"
#include "model/hook_point.h"

namespace tinylm {

struct HeadRef {
  int64_t layer = 0;
  int64_t head = 0;
  std::string label() const { return std::to_string(layer) + "." + std::to_string(head); }
};

// Parses "L.H[,L.H...]"; throws std::invalid_argument naming the bad item.
std::vector<HeadRef> parse_head_list(const std::string& text);

// Throws std::invalid_argument when a head is not in the model, naming the valid ranges.
void check_heads(const ModelConfig& config, const std::vector<HeadRef>& heads);

// Replaces the head's z with `value` (hs,) at every position, or with zeros when undefined.
[[nodiscard]] HookHandle ablate_head(GPT& model, HeadRef head, torch::Tensor value = {});

// Zero-ablates every head listed (after check_heads).
[[nodiscard]] std::vector<HookHandle> zero_ablate(GPT& model, const std::vector<HeadRef>& heads);

// The mean of every head's z over batch and positions: (L, nh, hs). tokens (N, T).
torch::Tensor mean_head_outputs(GPT& model, const torch::Tensor& tokens);

// A first-order estimate of each change below, from the gradient of the mean loss with
// respect to the head's z (model/analysis/window_survey.h): zeroing changes z by -z, so
// zero ~ -sum g.z; mean-ablating by mean - z, so mean ~ (sum g).mean - sum g.z.
struct AblationEstimate {
  double zero = 0.0, mean = 0.0, probe_zero = 0.0, probe_mean = 0.0;
};

struct HeadAblation {
  HeadRef head;
  bool exact = false;       // the four changes below were run; NaN when not
  double zero = 0.0;        // change in loss on the windows when zeroed (nats)
  double mean = 0.0;        // ... when replaced by its mean
  double probe_zero = 0.0;  // change in the probe's second-half (induction) loss when zeroed
  double probe_mean = 0.0;
  AblationEstimate estimate;
};

struct AblationTable {
  double loss = 0.0;        // unablated loss on the windows
  double probe_loss = 0.0;  // unablated induction loss
  // Exact rows first, by `zero`, largest first; then the estimated ones by estimate.zero.
  std::vector<HeadAblation> heads;
  // Over the exact rows, estimate against exact: zero, mean, probe_zero, probe_mean.
  std::vector<RankAgreement> agreement;
};

// How many heads an ablation table runs exactly: the top ones by attribution.
inline constexpr int64_t kExactHeads = 8;

// The windows' and the probe's surveys as an ablation table reads them: head outputs and
// attribution, the probe's objective its second half. Add `scores` to share them with head
// scores.
SurveyOptions ablation_survey_options(bool of_probe, int64_t probe_length);

// windows (N, T + 1) from the data; probe (n, 2R) from repeated_random_tokens; surveys of
// them with ablation_survey_options (pass their results to share a pass with head scores,
// or leave them null). Every head is estimated; the `exact` (-1: all) heads whose largest
// estimated change is largest are then ablated for real, each run from its layer's cached
// input, the heads of a layer together.
AblationTable ablation_table(GPT& model, const torch::Tensor& windows, const torch::Tensor& probe,
                             int64_t exact = kExactHeads,
                             const WindowSurvey* windows_survey = nullptr,
                             const WindowSurvey* probe_survey = nullptr);

// The mean loss over `span` of inputs (N, T) against targets with each head ablated alone,
// zeroed (.first) and replaced by means[l][h] (.second); each run starts at the head's
// layer from the unablated pass's residual stream. `clean` gets the unablated mean loss.
std::vector<std::pair<double, double>> exact_ablations(GPT& model, const torch::Tensor& inputs,
                                                       const torch::Tensor& targets,
                                                       PredictionSpan span,
                                                       const std::vector<HeadRef>& heads,
                                                       const torch::Tensor& means, double* clean);

}  // namespace tinylm
