#pragma once
// Autoregressive sampling: temperature, top-k and nucleus (top-p) filtering, then a draw
// from an explicit generator. No KV cache yet: each step runs the last block_size tokens.

#include <cstdint>
#include <functional>
#include <vector>

#include <torch/torch.h>

#include "model/gpt.h"

namespace tinylm {

struct SamplingOptions {
  double temperature = 1.0;  // 0 = greedy (argmax)
  int64_t top_k = 0;         // 0 = off; else keep the k most likely tokens
  double top_p = 1.0;        // 1 = off; else keep the smallest set with mass >= top_p
};

// Draws one token id from `logits` (V,) float.
int64_t sample_token(const torch::Tensor& logits, const SamplingOptions& options,
                     torch::Generator& generator);

// Extends `context` (non-empty) by max_new_tokens ids, calling on_token for each as soon as
// it is drawn. Returns the new ids.
std::vector<int64_t> generate(GPT& model, std::vector<int64_t> context, int64_t max_new_tokens,
                              const SamplingOptions& options, torch::Generator& generator,
                              const std::function<void(int64_t)>& on_token = nullptr);

}  // namespace tinylm
