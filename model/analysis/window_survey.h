#pragma once
// One survey of a set of windows that every view of them reads: each head's pattern scores
// (model/analysis/head_scores.h), reduced layer by layer as the patterns are made; the loss
// at each position; each head's output z summed (for its mean); and, when asked, the
// gradient of the mean loss with respect to each head's z (model/analysis/stream_gradients.h)
// summed over rows and positions, and its dot product with z: what a first-order estimate of
// zero- or mean-ablating each head needs. The windows go in passes sized by memory, so a
// GPT-2-shaped model's (T, T) patterns and 50257-wide logits never exist for all at once.

#include <cstdint>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "model/analysis/head_scores.h"
#include "model/gpt.h"
#include "model/window_loss.h"

namespace tinylm {

struct SurveyOptions {
  // The head scores to reduce from the patterns, by name (head_score_names()); none: the
  // patterns are not read.
  std::vector<std::string> scores;
  int64_t induction_from = 0;  // as head_scores' induction_from
  bool head_outputs = false;   // each head's z summed
  bool attribution = false;    // the gradients (needs targets)
  PredictionSpan span;         // the predictions the attribution's mean loss counts
};

struct WindowSurvey {
  HeadScores scores;             // when asked
  int64_t rows = 0, length = 0;  // N windows of T inputs
  torch::Tensor position_nats;   // (T,) float64, summed over windows; with targets
  torch::Tensor z_sum;           // (L, nh, hs) float64, over N x T positions
  torch::Tensor grad_sum;        // (L, nh, hs) float64: sum of d mean loss / d z
  torch::Tensor grad_dot_z;      // (L, nh) float64: sum of (d mean loss / d z) . z

  // The mean loss of the predictions in [span.from, span.to).
  double mean_loss(PredictionSpan span = {}) const;
  // Each head's mean output (L, nh, hs) float32.
  torch::Tensor z_mean() const;
};

// inputs (N, T) int64; targets (N, T) the next tokens, or undefined (then no losses and no
// attribution). Eval mode, the model only read: hooks are this thread's.
WindowSurvey survey_windows(GPT& model, const torch::Tensor& inputs, const torch::Tensor& targets,
                            const SurveyOptions& options);

// Windows of T inputs per survey pass: what kSurveyBytes holds of one window's working set.
inline constexpr int64_t kSurveyBytes = int64_t{768} << 20;
int64_t survey_rows(const ModelConfig& config, int64_t T, bool gradients);

}  // namespace tinylm
