#pragma once
// llama2.c's files, for its run.c: model.bin in the layout run.c reads (export.py's version
// 0, "legacy"), and tokenizer.bin (tokenizer.py's).
//   model.bin      7 int32: dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size
//                  (negative when the classifier is not the embedding), seq_len; then float32
//                  arrays: token embedding (V, C), the attention RMSNorm weights of every
//                  layer, then every layer's wq, wk, wv, wo, the FFN RMSNorm weights, w1
//                  (gate), w2 (down), w3 (up), the final RMSNorm, the rotary tables
//                  cos and sin (seq_len, hs / 2, which run.c skips), and the classifier
//                  when not shared.
//   tokenizer.bin  int32 max_token_length, then per id: float32 score, int32 length, bytes.
// Rotary pairs: tinylm rotates (x_i, x_{i + hs/2}), llama2.c (x_{2i}, x_{2i+1}), both by
// position * 10000^(-2i/hs). The rows of wq and wk are permuted within each head so that
// row 2i is tinylm's row i and row 2i + 1 its row i + hs/2: every score q . k is the same.
// Only runs llama2.c can run: rope, rmsnorm, swiglu, no biases, an MLP in every block.

#include <filesystem>
#include <string>
#include <vector>

#include "data/tokenizer.h"
#include "model/gpt.h"

namespace tinylm {

// The options of `config` that llama2.c's model lacks, as "model.key = value" phrases.
std::vector<std::string> llama2c_incompatibilities(const ModelConfig& config);

// Throws when llama2c_incompatibilities is not empty. Written atomically.
void write_llama2c_model(const std::filesystem::path& path, GPT& model);
void write_llama2c_tokenizer(const std::filesystem::path& path, const Tokenizer& tokenizer);

}  // namespace tinylm
