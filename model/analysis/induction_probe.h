#pragma once
// The induction probe: R random tokens repeated twice. A model with induction heads
// predicts the second copy from the first, so its loss on the second half falls far below
// the first half's. The halves' losses: the first half is the predictions of tokens 1..R-1
// (from positions 0..R-2); the second half is those of tokens R+1..2R-1 (from positions
// R..2R-2). Token R, the start of the repeat, is in neither: nothing announces it.

#include <cstdint>

#include <torch/torch.h>

#include "model/analysis/head_scores.h"
#include "model/gpt.h"

namespace tinylm {

// (count, 2R) int64. The R tokens of a row are distinct when R <= vocab (so the only
// repeats are the planted ones, as with a large vocabulary), else drawn with replacement.
torch::Tensor repeated_random_tokens(int64_t count, int64_t R, int64_t vocab,
                                     torch::Generator& generator);

// The probe's targets beside its 2R inputs: position i predicts token i + 1; the last
// position, which neither half counts, is given token 0.
torch::Tensor probe_targets(const torch::Tensor& probe);

struct ProbeLosses {
  double first_half = 0.0;   // mean nats
  double second_half = 0.0;  // the induction loss
};

// The halves' mean losses of the model on the probe (count, 2R).
ProbeLosses probe_losses(GPT& model, const torch::Tensor& probe);
// The same from a survey of the probe's 2R inputs (model/analysis/window_survey.h).
struct WindowSurvey;
ProbeLosses probe_losses(const WindowSurvey& survey);

struct ProbeResult {
  HeadScores scores;  // previous_token and induction, which counts the second half's rows only
  ProbeLosses losses;
};

ProbeResult run_induction_probe(GPT& model, const torch::Tensor& probe);

// R for a model: block_size / 2, so the probe fills one context.
inline int64_t probe_half_length(const ModelConfig& config) { return config.block_size / 2; }

}  // namespace tinylm
