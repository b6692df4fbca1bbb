#pragma once
// What each feature of an SAE is, read off text and weights (after Bricken et al. 2023's
// dashboards and Kissane et al. 2024's attention-output SAEs):
//   - how often it fires, and how strongly: its activation histogram;
//   - its top-activating positions (contexts);
//   - the tokens it fires on most often (what a search for a token finds);
//   - on hook_z, the heads that write it: its decoder direction's squared norm split over
//     the heads' slices of z;
//   - where its decoder direction reaches the residual stream (hook_z through c_proj, or a
//     stream hook directly), the tokens it promotes and suppresses through ln_f's weight and
//     the unembedding (ln_f's normalisation aside: the direct path of a unit activation);
//   - whether it is induction-like: where it fires, the current token occurred earlier in the
//     window, and the token that followed that occurrence is mostly one token A, which the
//     feature promotes: "the token after the previous occurrence is A", what an induction
//     head copies.

#include <cstdint>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "model/gpt.h"
#include "model/sae/hook_rows.h"
#include "model/sae/sparse_autoencoder.h"

namespace tinylm {

struct FeatureFiring {
  int64_t window = 0, position = 0;
  double activation = 0.0;
};

struct TokenScore {
  int64_t token = 0;
  double value = 0.0;  // a count, or a logit
};

struct FeatureSummary {
  int64_t index = 0;
  int64_t firings = 0;      // positions it fired on
  double frequency = 0.0;   // firings / positions
  double mean_activation = 0.0, max_activation = 0.0;  // over its firings
  std::vector<FeatureFiring> top;        // strongest first
  std::vector<int64_t> histogram;        // its firings in kHistogramBins bins over (0, max]
  std::vector<TokenScore> fires_on;      // the tokens at its firings, by count
  std::vector<double> head_shares;       // hook_z: per head, summing to 1; else empty
  std::vector<TokenScore> promoted, suppressed;  // by direct logit; empty where it writes nowhere
  // Of its activation mass: at positions whose token occurred earlier in the window; and of
  // those, where the next token is the one that followed the latest earlier occurrence.
  double repeat_share = 0.0, continues_share = 0.0;
  // The token most of its activation mass has as "the token after the previous occurrence"
  // of the current token, and that share (-1 and 0 when it never fires on a repeat).
  int64_t after_previous = -1;
  double after_previous_share = 0.0;
  std::string label;  // "induction", or empty
};

struct FeatureAnalysis {
  int64_t positions = 0;                         // rows read: windows x T
  torch::Tensor windows;                         // (N, T + 1) the text read
  double repeat_rate = 0.0, continues_rate = 0.0;  // the same shares over every position
  // Per token A: the fraction of positions whose token after the previous occurrence is A.
  std::vector<double> after_previous_rate;
  std::vector<FeatureSummary> features;          // by index
};

inline constexpr int64_t kHistogramBins = 20;

// A feature is named induction-like when, over at least kInductionFirings firings, at least
// kInductionShare of its activation falls where the token after the previous occurrence is
// one token A, that share is at least kInductionLift times the rate of such positions in the
// text (so that a token common everywhere names nothing), and, where it writes to the logits,
// A is the token it promotes most: it reads "A came after this token before" and predicts A.
// On the induction model's hook_z SAE, over half its features copy; the strongest hold 50-67%
// of their activation on their token A, against under 1% for A anywhere (docs/MEASUREMENTS.md).
inline constexpr double kInductionShare = 0.5;
inline constexpr double kInductionLift = 10.0;
inline constexpr int64_t kInductionFirings = 8;

// `windows` (N, T + 1) int64: rows are read at the first T positions; the last token is
// only the target of the continuation test.
FeatureAnalysis analyse_features(GPT& model, const HookRows& hook, const SparseAutoencoder& sae,
                                 const torch::Tensor& windows, int64_t top_firings = 8,
                                 int64_t top_tokens = 5);

// The feature's decoder direction in the residual stream (C,), or undefined where the hook
// point does not write the stream linearly (hook_q, the MLP's hidden units).
torch::Tensor residual_direction(GPT& model, const HookRows& hook, const torch::Tensor& decoder_row);

}  // namespace tinylm
