#pragma once
// One generation step for a batch of single new tokens, computed straight on the weights:
// BLAS matrix-vector products and plain loops over the KV cache, with no LibTorch operator
// in between. The same arithmetic as GPT::forward with a cache (tests hold the logits equal
// to 1e-5 for every block option), without its per-operator cost: a cached step of the baby
// model is a few hundred small operators, each costing microseconds of dispatch and
// allocation, against about 3 MFLOP of work per token.
//
// Only for what it can do exactly: float32 weights on the CPU, eval mode, no hooks attached
// (an ablation or a cache of activations needs the hooked path), and a cache that already
// holds the earlier positions.

#include <torch/torch.h>

#include "model/gpt.h"
#include "model/kv_cache.h"

namespace tinylm {

bool can_decode_directly(GPT& model, const KVCache& cache);

// ids (B,) int64, the tokens after the cached positions -> logits (B, V). Appends their
// keys and values to the cache, sliding it first with relative positions.
torch::Tensor decode_step(GPT& model, const torch::Tensor& ids, KVCache& cache);

}  // namespace tinylm
