#pragma once
// Head scores: how much of a head's attention falls where a mechanism would put it. For a
// pattern A (T x T, rows sum to 1) and a 0/1 target matrix P,
//     score = mean over rows i with at least one target of  sum_j A[i,j] P[i,j].
// Targets: previous_token P[i,i-1]; self P[i,i]; first_token P[i,0];
// duplicate_token [j < i and tok[j] = tok[i]]; induction [1 <= j < i and tok[j-1] = tok[i]].
// Also the mean row entropy in nats. Reads patterns through blocks.L.attn.hook_pattern.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "model/gpt.h"

namespace tinylm {

// The target names above, in that order; "entropy" is reported beside them.
const std::vector<std::string>& head_target_names();
// The target names and "entropy": every score a survey can reduce.
const std::vector<std::string>& head_score_names();

// P for each row of tokens: (B, T) int64 -> (B, T, T) float 0/1.
torch::Tensor target_matrix(const std::string& target, const torch::Tensor& tokens);

// The definition above for one batch: pattern (B, nh, T, T), target (B, T, T); rows (B, T)
// bool selects the rows that may count (undefined: all). Returns the per-head sum over
// counted rows (nh,) and the number of counted rows, so batches can be pooled.
struct ScoreSum {
  torch::Tensor sum;  // (nh,) float64
  int64_t rows = 0;
};
ScoreSum score_sum(const torch::Tensor& pattern, const torch::Tensor& target,
                   const torch::Tensor& rows = {});

// Sum over all rows of the row entropy -sum_j A log A (nats): (B, nh, T, T) -> (nh,) float64.
torch::Tensor entropy_sum(const torch::Tensor& pattern);

struct HeadScores {
  std::map<std::string, torch::Tensor> values;  // target name or "entropy" -> (L, nh) float64
  int64_t sequences = 0;
  int64_t length = 0;
};

// Every head's scores pooled over the rows of `tokens` (N, T), in passes sized by memory
// (model/analysis/window_survey.h). When `induction_from` > 0 only rows i >= induction_from
// count for the induction score (the repeated half of a probe).
HeadScores head_scores(GPT& model, const torch::Tensor& tokens, int64_t induction_from = 0);

}  // namespace tinylm
