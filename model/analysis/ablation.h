#pragma once
// Ablation: take a head out and see what the model loses. A head is ablated at
// blocks.L.attn.hook_z, its output before c_proj: zeroed, or replaced by its mean over the
// data. The hooks last as long as their handles.

#include <cstdint>
#include <string>
#include <vector>

#include <torch/torch.h>

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
torch::Tensor mean_head_outputs(GPT& model, const torch::Tensor& tokens, int64_t batch_size = 8);

struct HeadAblation {
  HeadRef head;
  double zero = 0.0;        // change in loss on the windows when zeroed (nats)
  double mean = 0.0;        // ... when replaced by its mean
  double probe_zero = 0.0;  // change in the probe's second-half (induction) loss when zeroed
  double probe_mean = 0.0;
};

struct AblationTable {
  double loss = 0.0;                // unablated loss on the windows
  double probe_loss = 0.0;          // unablated induction loss
  std::vector<HeadAblation> heads;  // sorted by `zero`, largest first
};

// windows (N, T + 1) from the data; probe (n, 2R) from repeated_random_tokens.
AblationTable ablation_table(GPT& model, const torch::Tensor& windows, const torch::Tensor& probe);

}  // namespace tinylm
