#pragma once
// An SAE's directory, in SAELens's layout so that SAELens (SAE.load_from_disk) and numpy
// read it (docs/FORMATS.md):
//   cfg.json                 SAELens's config: d_in, d_sae, hook_name, architecture "topk",
//                            activation_fn_kwargs {k}, ...
//   sae_weights.safetensors  W_enc (d_in, d_sae), W_dec (d_sae, d_in), b_enc, b_dec; float32
//   metrics.json             tinylm's measurements of it (model/sae/sae_evaluation.h)
//   training.safetensors     what `features --resume` continues from: the weights again,
//                            Adam's moments, when each feature last fired, and (metadata)
//                            the tokens and steps done and the generator's state
// Each file is written atomically, training.safetensors first: it alone is read to resume,
// so a crash between two writes leaves a whole one to resume from, and the exported
// weights one checkpoint behind at worst.

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "model/sae/sparse_autoencoder.h"
#include "train/run/safetensors.h"

namespace tinylm {

// Where `features` puts an SAE of `run_dir` by default: saes/HOOK-wWIDTH-kK.
std::filesystem::path sae_directory(const std::filesystem::path& run_dir, const std::string& hook,
                                    const SaeShape& shape);

// What cfg.json records besides the weights' shapes.
struct SaeOrigin {
  std::string hook;        // hook_name, TransformerLens's
  int64_t hook_layer = -1; // its block (-1 outside the blocks)
  std::string model_name;  // the run directory
  std::string dataset;     // the corpus the activations came from
  int64_t context_size = 0;
  bool per_head = false;   // hook_z: a row is the heads' z side by side (SAELens's "hook_z" reshape)
};

struct SaeProgress {
  int64_t tokens_done = 0, tokens_total = 0, steps = 0;
  double seconds = 0.0;   // training time so far
  std::string rng;        // the activation sampler's generator, hex
  torch::Tensor last_fired;  // (width,) int64: tokens_done when each feature last fired; -1 never
  NamedTensors moments;      // Adam's: "exp_avg.W_enc", "exp_avg_sq.W_enc", ...
  int64_t adam_steps = 0;
  nlohmann::json options;    // the training settings (lr, batch, ...), for the resumed run to keep
};

nlohmann::json sae_config_json(const SparseAutoencoder& sae, const SaeOrigin& origin);

// cfg.json, sae_weights.safetensors and metrics.json, each atomically.
void save_sae(const std::filesystem::path& dir, const SparseAutoencoder& sae, const SaeOrigin& origin,
              const nlohmann::json& metrics);
void save_sae_progress(const std::filesystem::path& dir, const SparseAutoencoder& sae,
                       const SaeProgress& progress);

struct LoadedSae {
  SparseAutoencoder sae;
  SaeOrigin origin;
  nlohmann::json metrics;  // null when the directory has none
};
// Reads cfg.json and sae_weights.safetensors (and metrics.json when there); throws naming the
// file and what is wrong: a missing file, an architecture other than topk, shapes that do not
// agree with cfg.json.
LoadedSae load_sae(const std::filesystem::path& dir);

struct ResumedSae {
  SparseAutoencoder sae;
  SaeProgress progress;
};
ResumedSae load_sae_progress(const std::filesystem::path& dir);
bool has_sae_progress(const std::filesystem::path& dir);

}  // namespace tinylm
