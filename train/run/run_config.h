#pragma once
// Everything a run is made of, as read from a TOML file with sections [model], [data],
// [train] and [sample], plus `section.key=value` overrides from the command line. Strict:
// an unknown key names the closest valid one; a wrong type or range names the key, where
// it came from, and what is allowed. The resolved config is written back as config.toml.

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "data/induction_corpus.h"
#include "data/tokenizer.h"
#include "model/config.h"
#include "model/generate.h"

namespace tinylm {

// The seed of every command that draws (train, sample, inspect) when none is given.
inline constexpr int64_t kDefaultSeed = 1337;

enum class DataSource { kFile, kInduction };  // a text corpus | data/induction_corpus.h
enum class SentencePieceModel { kBpe, kUnigram };
enum class Sampling { kRandom, kEpoch };  // uniform windows | every window once per epoch
enum class Dtype { kAuto, kFloat32, kBfloat16 };
enum class OptimizerKind { kAdamW, kMuon };

constexpr std::array<const char*, 2> enum_names(DataSource) { return {"file", "induction"}; }
constexpr std::array<const char*, 2> enum_names(SentencePieceModel) { return {"bpe", "unigram"}; }
constexpr std::array<const char*, 2> enum_names(Sampling) { return {"random", "epoch"}; }
constexpr std::array<const char*, 3> enum_names(Dtype) { return {"auto", "float32", "bfloat16"}; }
constexpr std::array<const char*, 2> enum_names(OptimizerKind) { return {"adamw", "muon"}; }

// The keys' meanings are in their declarations (run_config.cpp) and docs/CONFIG.md.
struct DataConfig {
  DataSource source = DataSource::kFile;
  std::string path;  // in a config file, relative to its directory (so are the paths below)
  std::string val_path;
  int64_t synthetic_size = 1000000;
  int64_t induction_prefix_max = 24;  // the generated corpus's shape (data/induction_corpus.h)
  int64_t induction_repeat_min = 2;
  int64_t induction_repeat_max = 32;
  int64_t induction_symbols = 64;
  double train_fraction = 0.9;
  TokenizerKind tokenizer = TokenizerKind::kChar;
  std::string tokenizer_model;
  int64_t vocab_size = 1024;
  SentencePieceModel model_type = SentencePieceModel::kBpe;
  double character_coverage = 1.0;
  bool byte_fallback = true;
  std::vector<std::string> user_defined_symbols;
  Sampling sampling = Sampling::kRandom;
  std::string cache_dir;  // empty: cache/<config name> in the working directory

  InductionShape induction_shape() const;
};

struct TrainConfig {
  int64_t batch_size = 12;
  int64_t gradient_accumulation_steps = 1;
  int64_t max_iters = 2000;
  double learning_rate = 1e-3;
  bool decay_lr = true;
  int64_t warmup_iters = 100;
  int64_t stable_iters = 0;
  int64_t lr_decay_iters = 2000;
  double min_lr = 1e-4;
  double beta1 = 0.9;
  double beta2 = 0.99;
  double weight_decay = 0.1;
  double grad_clip = 1.0;
  OptimizerKind optimizer = OptimizerKind::kAdamW;  // train/muon.h
  double muon_learning_rate = 0.02;                 // Muon's peak rate, scheduled as learning_rate
  double muon_momentum = 0.95;
  int64_t eval_interval = 250;
  int64_t eval_iters = 20;
  int64_t log_interval = 10;
  bool snapshots = true;        // train/run/snapshots.h
  int64_t probe_interval = 25;  // train/run/phase_change.h; 0: at evals only
  int64_t seed = kDefaultSeed;
  Dtype dtype = Dtype::kAuto;  // train/precision.h chooses
  std::string device = "cpu";
  double dist_timeout_s = 60.0;
};

struct SampleConfig {
  std::string prompt = "\n";
  int64_t max_new_tokens = 500;
  double temperature = SamplingOptions{}.temperature;  // the defaults are model/generate.h's
  int64_t top_k = SamplingOptions{}.top_k;
  double top_p = SamplingOptions{}.top_p;
  int64_t num_samples = 1;
  int64_t seed = kDefaultSeed;
  std::string stop;

  SamplingOptions sampling() const { return {temperature, top_k, top_p}; }
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

// Reads `path` on top of the defaults; throws std::runtime_error naming the file (and line)
// on a parse error, unknown key or bad value.
RunConfig load_run_config(const std::filesystem::path& path);

// Applies overrides such as "train.max_iters=100" (value in TOML syntax; strings may be bare).
void apply_overrides(RunConfig& config, const std::vector<std::string>& overrides);

// The resolved config as a TOML document (every key, defaults included).
std::string to_toml(const RunConfig& config);

// Every key of a run, "section.key", in the order of the TOML files.
const std::vector<ConfigKey<RunConfig>>& run_keys();

// All valid keys, "section.key".
std::vector<std::string> config_keys();

// Whether a resumed run must keep key `name` as it was trained: every model key, and every
// data key that decides what its token ids mean (the tokenizer and its settings).
bool fixed_by_the_run(const std::string& name);

// The Markdown table of every key (name, default, accepted values, meaning) that
// docs/CONFIG.md holds; `tinylm keys` prints it.
std::string config_key_table();

// The key in `candidates` closest to `key` by edit distance (empty if none is close).
std::string closest_key(const std::string& key, const std::vector<std::string>& candidates);

}  // namespace tinylm
