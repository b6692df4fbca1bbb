#pragma once
// nanoGPT's ckpt.pt, in and out: the torch.save zip that its train.py writes and its
// sample.py and train.py (init_from = 'resume') read, through LibTorch's own pickle reader
// and writer (torch::pickle_load, torch::pickle_save). It holds
//   model          the state dict, nanoGPT's names (tinylm's), possibly with torch.compile's
//                  "_orig_mod." prefix; lm_head.weight is the token embedding again (tied);
//                  with PyTorch < 2 each block's causal mask, attn.bias (1, 1, T, T), too
//   model_args     GPTConfig: n_layer, n_head, n_embd, block_size, bias, vocab_size, dropout
//   iter_num, best_val_loss, config (train.py's globals: learning_rate, max_iters, ...)
//   optimizer      torch.optim.AdamW's state dict: param_groups [decayed (dim >= 2), the
//                  rest], each listing parameter indices, in named_parameters order, and
//                  state {index: {step, exp_avg, exp_avg_sq}}
// Only the GPT-2 block (learned positions, LayerNorm, GELU, tied embeddings, full attention
// heads) is nanoGPT's; meta.pkl, a plain pickle with stoi and itos, is its char tokenizer.

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "model/gpt.h"
#include "train/run/run_config.h"

namespace tinylm {

struct NanoGptCheckpoint {
  ModelConfig model;                             // from model_args; vocab_size set
  std::map<std::string, torch::Tensor> weights;  // tinylm's names, no prefix, no masks
  std::map<std::string, torch::Tensor> moments;  // "exp_avg.NAME", "exp_avg_sq.NAME"; empty
                                                 // without an optimizer state
  int64_t optimizer_steps = 0;
  int64_t iter_num = 0;
  double best_val_loss = 0.0;
  std::map<std::string, std::string> config;  // train.py's scalars, as TOML values
};

// Throws std::runtime_error naming `path` and what is wrong: not a torch.save zip, a missing
// key, model_args that are not GPTConfig's, shapes that disagree with them.
NanoGptCheckpoint read_nanogpt_checkpoint(const std::filesystem::path& path);

// meta.pkl's itos (id -> character), in id order.
std::vector<std::string> read_nanogpt_meta(const std::filesystem::path& path);

// The options of `config` that nanoGPT's GPT lacks, as "model.key = value" phrases; empty
// when the model is nanoGPT's.
std::vector<std::string> nanogpt_incompatibilities(const ModelConfig& config);

// Writes `model` as nanoGPT's ckpt.pt at `path`, atomically, with its AdamW `moments`
// ("exp_avg.NAME", ...; none: no optimizer state) after `optimizer_steps` steps. `config`'s
// train keys become train.py's config dict, with `dataset`. `mask_buffers` adds each block's
// attn.bias, which nanoGPT registers (and so requires) only under PyTorch < 2. Throws when
// nanogpt_incompatibilities(model) is not empty.
void write_nanogpt_checkpoint(const std::filesystem::path& path, GPT& model,
                              const RunConfig& config,
                              const std::map<std::string, torch::Tensor>& moments,
                              int64_t optimizer_steps, int64_t iter_num, double best_val_loss,
                              const std::string& dataset, bool mask_buffers);

// meta.pkl for a char vocabulary, a plain pickle {vocab_size, itos, stoi} as nanoGPT's
// prepare.py writes it (sample.py reads it with pickle.load).
void write_nanogpt_meta(const std::filesystem::path& path, const std::vector<std::string>& itos);

}  // namespace tinylm
