#pragma once
// Everything a run is made of, as read from a TOML file with sections [model], [data],
// [train] and [sample], plus `section.key=value` overrides from the command line. Strict:
// an unknown key names the closest valid one; a wrong type or range names the key, where
// it came from, and what is allowed. The resolved config is written back as config.toml.

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "model/config.h"

namespace tinylm {

struct DataConfig {
  std::string source = "file";   // file: the text at `path`; induction: the synthetic corpus
                                 // of data/induction_corpus.h, generated from train.seed
  std::string path;              // a UTF-8 file or a directory of *.txt; in a config file,
                                 // relative to that file's directory (so are the paths below)
  std::string val_path;          // a separate validation corpus; empty: split `path`
  int64_t synthetic_size = 1000000;  // characters of a generated corpus
  double train_fraction = 0.9;   // the first part of the tokens trains, the rest validates
  std::string tokenizer = "char";  // char | byte | sentencepiece
  std::string tokenizer_model;   // an existing SentencePiece .model; empty: train one
  int64_t vocab_size = 1024;     // SentencePiece training: pieces in the vocabulary
  std::string model_type = "bpe";  // bpe | unigram
  double character_coverage = 1.0;  // share of characters that get their own piece
  bool byte_fallback = true;     // characters without a piece become UTF-8 byte pieces
  std::vector<std::string> user_defined_symbols;  // kept whole, e.g. ["<|endoftext|>"]
  std::string sampling = "random";  // random windows, or epoch: every window once per epoch
  std::string cache_dir;         // token files; empty: cache/<config name> in the working dir
};

struct TrainConfig {
  int64_t batch_size = 12;
  int64_t gradient_accumulation_steps = 1;
  int64_t max_iters = 2000;
  double learning_rate = 1e-3;
  bool decay_lr = true;
  int64_t warmup_iters = 100;
  int64_t lr_decay_iters = 2000;
  double min_lr = 1e-4;
  double beta1 = 0.9;
  double beta2 = 0.99;
  double weight_decay = 0.1;
  double grad_clip = 1.0;  // 0 = off
  int64_t eval_interval = 250;
  int64_t eval_iters = 20;
  int64_t log_interval = 10;
  int64_t seed = 1337;
  // float32 | bfloat16: the precision of the forward and backward matmuls (autocast);
  // weights, optimizer state and the loss stay float32.
  std::string dtype = "float32";
  // cpu | cuda | cuda:N: where the model, batches and optimizer state live.
  std::string device = "cpu";
  // How long a rank waits for the others (start-up, every collective) before it gives up.
  double dist_timeout_s = 60.0;
};

struct SampleConfig {
  std::string prompt = "\n";
  int64_t max_new_tokens = 500;
  double temperature = 0.8;
  int64_t top_k = 200;
  double top_p = 1.0;
  int64_t num_samples = 1;
  int64_t seed = 1337;
  std::string stop;  // a sample ends after the first occurrence of this text; empty = never
};

// A bound against typos (a sample this long is megabytes of text).
inline constexpr int64_t kMaxNewTokensLimit = 100000;

struct RunConfig {
  ModelConfig model;
  DataConfig data;
  TrainConfig train;
  SampleConfig sample;

  // Throws std::invalid_argument naming the first bad field. model.vocab_size may be unset.
  void validate() const;
};

// Reads `path` on top of the defaults; throws on a parse error, unknown key or bad value.
RunConfig load_run_config(const std::filesystem::path& path);

// Applies overrides such as "train.max_iters=100" (value in TOML syntax; strings may be bare).
void apply_overrides(RunConfig& config, const std::vector<std::string>& overrides);

// The resolved config as a TOML document (every key, defaults included).
std::string to_toml(const RunConfig& config);

// All valid keys, "section.key".
std::vector<std::string> config_keys();

// The key in `candidates` closest to `key` by edit distance (empty if none is close).
std::string closest_key(const std::string& key, const std::vector<std::string>& candidates);

}  // namespace tinylm
