#pragma once
// Autoregressive sampling: temperature, top-k and nucleus (top-p) filtering, then a draw
// from an explicit generator; several samples of one prompt in one batch; a KV cache.
//
// With the cache each step runs the new token only. Past block_size the window slides:
// with relative positions (rope, none, relative, alibi) the cache drops its oldest
// position; with absolute ones (learned, sinusoidal) the window is re-encoded from scratch,
// since every position in it moves. Re-encoding gives exactly the logits of running without a
// cache. Dropping does so for one layer; in deeper models a cached key above layer 0 still carries
// what its token saw when it was computed, which reaches further back than the window (as in
// sliding-window attention).

#include <cstdint>
#include <functional>
#include <vector>

#include <torch/torch.h>

#include "model/gpt.h"

namespace tinylm {

// The one source of the sampling defaults: `sample`, `bench` and a config's [sample] all
// start from these (nanoGPT's sample.py: temperature 0.8, top_k 200).
struct SamplingOptions {
  double temperature = 0.8;  // 0 = greedy (argmax); 1 = the model's own distribution
  int64_t top_k = 200;       // 0 = off; else keep the k most likely tokens
  double top_p = 1.0;        // 1 = off; else keep the smallest set with mass >= top_p
};

// Draws one token id per row of `logits` (B, V) -> (B,) int64.
torch::Tensor sample_tokens(const torch::Tensor& logits, const SamplingOptions& options,
                            torch::Generator& generator);
// One row: logits (V,) -> an id.
int64_t sample_token(const torch::Tensor& logits, const SamplingOptions& options,
                     torch::Generator& generator);

struct GenerationOptions {
  int64_t max_new_tokens = 100;
  int64_t num_samples = 1;  // rows of the batch, all continuing the same context
  SamplingOptions sampling;
  bool use_cache = true;
};

// Called with (sample, id) for each token as soon as it is drawn, sample by sample in order;
// returns whether that sample wants more. Generation ends when no sample does.
using TokenCallback = std::function<bool(int64_t sample, int64_t id)>;

// Extends `context` (non-empty) by up to max_new_tokens ids per sample. Returns the new ids
// of each sample, up to and including the token where its callback said stop.
std::vector<std::vector<int64_t>> generate(GPT& model, const std::vector<int64_t>& context,
                                           const GenerationOptions& options,
                                           torch::Generator& generator,
                                           const TokenCallback& on_token = nullptr);

// The logits (B, V) of the last position for every step of extending `tokens`' first
// `prompt` columns by the rest, teacher-forced: row n holds the step after prompt + n tokens.
// (B, S) int64 in, (B, S - prompt + 1, V) out. For tests and benchmarks of the two paths.
torch::Tensor step_logits(GPT& model, const torch::Tensor& tokens, int64_t prompt, bool use_cache);

}  // namespace tinylm
