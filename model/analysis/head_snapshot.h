#pragma once
// A snapshot of every head at one moment of training: what the report replays to show how
// circuits formed (docs/INSPECT.md: During training). On two fixed probes, a text (the first
// tokens of the val split) and the induction probe (random tokens repeated):
//   patterns        each head's attention pattern on both;
//   entropy         mean row entropy on the text (nats);
//   mean_distance   mean over the text's rows i of sum_j A[i, j] (i - j): how far back the head
//                   reads (1 for a previous-token head, about i / 2 for a uniform one);
//   previous_token  the previous-token score on the text (model/analysis/head_scores.h);
//   induction       the induction score on the probe's repeat;
// and from the weights alone the position prior and the OV copying score
// (model/analysis/priors.h).

#include <torch/torch.h>

#include "model/gpt.h"

namespace tinylm {

struct HeadSnapshot {
  torch::Tensor text_pattern;      // (L, nh, T, T)
  torch::Tensor probe_pattern;     // (L, nh, 2R, 2R)
  torch::Tensor position_pattern;  // (L, nh, P, P); undefined with pos_encoding = none
  torch::Tensor ov_copying, entropy, mean_distance, previous_token, induction;  // (L, nh)
};

// text (T,), probe (2R,) token ids; the model is put in eval mode for it and back.
HeadSnapshot snapshot_heads(GPT& model, const torch::Tensor& text, const torch::Tensor& probe);

// The definition above on patterns (B, nh, T, T): (nh,) float64, averaged over batch and rows.
torch::Tensor mean_attention_distance(const torch::Tensor& pattern);

}  // namespace tinylm
