#pragma once
// The run directory: what a checkpoint writes and what sample/eval/resume read back.
//   config.toml  config.json  tokenizer.json (+ tokenizer.model)  model.safetensors
//   optimizer.safetensors
//   state.json   metrics.jsonl   best/ (the same files at the best val loss so far)
// A checkpoint's files change together (train/run/checkpoint_transaction.h): a crash at any
// moment leaves the one before or the one after, never a mix. state.json is the manifest:
// it records every other file's checksum, and its own. Every read verifies before it trusts
// (checksums, then names and shapes against config.json and the step each file records);
// bytes that fail are an IntegrityError naming the file (and the tensor), which points to
// best/ when that copy is intact. Runs from before checksums load with a one-line notice.

#include <cstdint>
#include <filesystem>
#include <limits>
#include <map>
#include <string>

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "data/batches.h"
#include "data/io/checksum.h"
#include "data/tokenizer.h"
#include "model/gpt.h"
#include "train/run/run_config.h"
#include "train/run/safetensors.h"

namespace tinylm {

// What, besides weights and optimizer moments, makes a resumed run equal to an unbroken one.
struct TrainingState {
  int64_t step = 0;             // optimizer steps completed
  int64_t last_eval_step = -1;  // the step whose eval is already logged
  double best_val_loss = std::numeric_limits<double>::infinity();
  uint64_t metrics_bytes = 0;  // length of metrics.jsonl when this checkpoint was written
  int64_t threads = 0;
  int64_t world_size = 1;  // ranks that trained it (runs from before data parallel: 1)
  std::string train_rng;   // generator states, hex
  std::string eval_rng;
  EpochPosition epoch;  // where epoch sampling stands (data.sampling = "epoch")
  std::string dtype;    // the matmuls' precision as chosen (train/precision.h); "" before
  std::string dtype_reason;
  nlohmann::json phase_change;  // train/run/phase_change.h's, once found; null before
};

struct LoadedRun {
  RunConfig config;
  std::shared_ptr<const Tokenizer> tokenizer;
  GPT model;
};

nlohmann::json model_config_to_json(const ModelConfig& config);
ModelConfig model_config_from_json(const nlohmann::json& doc, const std::string& source);

std::string generator_state(torch::Generator& generator);
void set_generator_state(torch::Generator& generator, const std::string& hex,
                         const std::string& source);

// Writes every file of a checkpoint into `dir` (created if needed), state.json last.
void save_checkpoint(const std::filesystem::path& dir, const RunConfig& config,
                     const Tokenizer& tokenizer, GPT& model, const NamedTensors& optimizer_moments,
                     const TrainingState& state);

// Copies model.safetensors into `model`; names, dtypes and shapes must agree exactly.
// Returns the step the file records, or -1 when it records none (a file from elsewhere).
int64_t load_weights(const std::filesystem::path& path, GPT& model);

// Loads config, tokenizer and weights for sample/eval; validates all of them.
LoadedRun load_run(const std::filesystem::path& dir);

// The optimizer's moments as optimizer.safetensors holds them, for the optimizer to restore
// (train/adamw.h). The file and the weights already loaded (`model_step`, what load_weights
// returned) must both be from `expected_step`.
struct OptimizerFile {
  std::map<std::string, torch::Tensor> tensors;
  int64_t step = 0;
  std::string path;  // for errors
};
OptimizerFile load_optimizer(const std::filesystem::path& dir, int64_t expected_step,
                             int64_t model_step);

TrainingState load_training_state(const std::filesystem::path& dir);

// Checks every file of the checkpoint in `dir` against state.json and every tensor against
// its checksum; returns its step. Throws IntegrityError on the first that fails, or when the
// checkpoint has no checksums at all.
int64_t verify_checkpoint(const std::filesystem::path& dir);

// An IntegrityError from reading `dir` again, pointing to dir/best when that is intact.
[[noreturn]] void rethrow_with_best_hint(const std::exception& error,
                                         const std::filesystem::path& dir);

}  // namespace tinylm
