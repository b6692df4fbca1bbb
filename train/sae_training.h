#pragma once
// Training an SAE on a hook point's activations, streamed from a run's training tokens:
// random windows go through the model (stopping at the hook), their rows fill a buffer of
// many windows, and the buffer is drawn in shuffled batches for Adam steps on the summed
// squared error (model/sae/sparse_autoencoder.h). b_dec starts at the first buffer's mean
// (the activations' centre; SAELens's "mean" init). A feature is dead when it has not fired
// in the last `dead_tokens` tokens. Everything a resumed run needs is in SaeProgress (and
// train/run/sae_files.h writes it), so an interrupted run continues where it stopped (with
// a fresh buffer: the rows of the one in use when it stopped are not revisited).

#include <atomic>
#include <cstdint>
#include <functional>

#include <nlohmann/json.hpp>

#include "data/token_sequence.h"
#include "model/gpt.h"
#include "model/sae/hook_rows.h"
#include "model/sae/sparse_autoencoder.h"
#include "train/run/sae_files.h"

namespace tinylm {

struct SaeTrainingOptions {
  int64_t tokens = int64_t{1} << 20;      // activations to train on
  int64_t batch = 4096;                   // rows per Adam step
  double lr = 2e-3;  // at 2^20 tokens as good as 1e-3 at 2^21 (docs/MEASUREMENTS.md)
  int64_t windows_per_pass = 16;          // windows per forward pass of the model
  int64_t buffer_passes = 16;             // passes mixed in one shuffled buffer
  int64_t dead_tokens = int64_t{1} << 19;  // a feature that has not fired in these is dead
  uint64_t seed = 1337;

  nlohmann::json to_json() const;
  // The settings a resumed run keeps (all but tokens, which may grow).
  static SaeTrainingOptions from_json(const nlohmann::json& doc, int64_t tokens);
};

struct SaeTrainingHooks {
  const std::atomic<bool>* stop_requested = nullptr;  // stop after the current step
  // Called every `checkpoint_seconds` of training and at the end (finished or stopped).
  std::function<void(const SparseAutoencoder&, const SaeProgress&)> checkpoint;
  double checkpoint_seconds = 60.0;
  // Called after every step: the tokens done, the total, the step's loss, tokens per second.
  std::function<void(const SaeProgress&, double loss, double tokens_per_s)> step;
};


// Trains until progress.tokens_total tokens are done or a stop is asked; returns whether it
// finished. `progress` is fresh (tokens_done 0: b_dec is set from the first buffer) or
// resumed. `block_size`: the windows' length.
bool train_sae(GPT& model, const HookRows& hook, const TokenSequence& tokens, int64_t block_size,
               SparseAutoencoder& sae, SaeProgress& progress, const SaeTrainingOptions& options,
               const SaeTrainingHooks& hooks = {});

// The fraction of features dead at `progress` (not fired in the last dead_tokens tokens, or
// fewer when fewer were seen: every one seen).
double dead_fraction(const SaeProgress& progress, int64_t dead_tokens);

}  // namespace tinylm
