#pragma once
// Hugging Face's GPT-2, in: a directory as `save_pretrained` (or a download from the Hub)
// leaves it:
//   config.json         GPT2Config: n_layer, n_head, n_embd, n_positions, vocab_size,
//                       activation_function ("gelu_new": GELU's tanh approximation), ...
//   model.safetensors   the weights, named h.L.attn.c_attn.weight, ... (with "transformer."
//                       before them when saved from GPT2LMHeadModel). Its Conv1D layers hold
//                       their weights as (in, out), the transpose of nn.Linear's (out, in).
//   vocab.json, merges.txt   GPT-2's byte-level BPE (data/gpt2_tokenizer.h)
// The names become nanoGPT's (tinylm's): h.L.X -> transformer.h.L.X, wte -> transformer.wte,
// and the four Conv1D weights per block are transposed. The causal-mask buffers
// (attn.bias, attn.masked_bias) that older files carry are dropped. Only what GPT-2's
// forward pass is, tinylm's learned-position LayerNorm block with biases, is read: any
// option that changes it (another activation, layer_norm_epsilon, inverse-layer scaling,
// cross attention) is refused by name.

#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include <torch/torch.h>

#include "data/gpt2_tokenizer.h"
#include "model/config.h"

namespace tinylm {

struct HfGpt2Checkpoint {
  ModelConfig model;                             // vocab_size set
  std::map<std::string, torch::Tensor> weights;  // tinylm's names, nn.Linear layout, float32
  std::unique_ptr<Gpt2Tokenizer> tokenizer;
};

// Throws std::runtime_error naming the file and what is wrong: a missing file or key, an
// architecture other than gpt2, an option tinylm's block lacks, a tensor missing, unknown
// or of the wrong shape, a vocabulary whose size disagrees with config.json.
HfGpt2Checkpoint read_hf_gpt2(const std::filesystem::path& dir);

}  // namespace tinylm
