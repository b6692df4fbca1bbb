#pragma once
// The views of `tinylm inspect` as typed results: the attention maps of a prompt, head
// scores with the induction probe, ablation, priors, the logit lens, activation patching,
// composition scores, direct logit attribution, geometry, loss by position, context drift,
// and the training curves
// of metrics.jsonl. They become text in tools/inspect/inspection_tables.h and JSON (the format is
// in docs/FORMATS.md) only at the output, in tools/inspect/inspection_json.h.

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "model/analysis/ablation.h"
#include "model/analysis/activation_patching.h"
#include "model/analysis/composition.h"
#include "model/analysis/context_drift.h"
#include "model/analysis/geometry.h"
#include "model/analysis/head_scores.h"
#include "model/analysis/induction_probe.h"
#include "model/analysis/logit_attribution.h"
#include "model/analysis/logit_lens.h"
#include "model/analysis/position_loss.h"
#include "model/analysis/priors.h"
#include "model/analysis/token_circuits.h"
#include "model/sae/feature_analysis.h"
#include "train/run/checkpoint.h"
#include "train/run/sae_files.h"
#include "train/run/snapshots.h"

namespace tinylm {

class InspectionCache;  // inspection_cache.h

// What head scores and ablation read.
struct InspectData {
  torch::Tensor windows;  // (N, T + 1) from the data
  std::vector<int64_t> window_starts;
  std::string source;   // where they came from, for the reader
  torch::Tensor probe;  // (n, 2R), repeated random tokens
};

struct AttentionView {
  torch::Tensor ids;       // (T,) the prompt's tokens, the last block_size of them
  torch::Tensor patterns;  // (L, nh, T, T)
};

struct HeadsView {
  std::string source;
  HeadScores scores;  // on the windows
  ProbeResult probe;  // on the induction probe
  int64_t probe_sequences = 0, probe_length = 0;
};

struct AblationView {
  std::string source;
  int64_t windows = 0;
  std::vector<int64_t> window_starts;  // where each window begins in the text
  torch::Tensor probe;                 // (n, 2R) the probe's tokens
  AblationTable table;
};

struct AttributionView {
  torch::Tensor ids;  // (T,)
  LogitAttribution attribution;
};

struct PatchingView {
  torch::Tensor clean, corrupt;  // (T,) the two texts' tokens
  PatchingResult result;
};

struct LensView {
  torch::Tensor ids;  // (T,)
  LogitLens lens;     // with the prompt's own next-token losses
};

struct PositionLossView {
  std::string source;
  int64_t context = 0;  // the windows' length, N
  PositionLoss loss;
};

struct DriftView {
  std::string source;
  ContextDrift drift;
};

struct AnalogyView {
  int64_t a = 0, b = 0, c = 0;
  Analogy nearest;
};

// An SAE's features (model/sae/feature_analysis.h) on windows of the text.
struct FeaturesView {
  std::string dir, source;
  SaeOrigin origin;
  SaeShape shape;
  nlohmann::json metrics;  // its metrics.json; null when it has none
  FeatureAnalysis analysis;
};

// metrics.jsonl as the report plots it, records passed through as they were written.
struct TrainingCurves {
  std::vector<std::pair<int64_t, double>> train;  // step, loss
  struct Eval {
    int64_t step;
    double val_loss, train_loss;
  };
  std::vector<Eval> eval;
  // The probe's readings (train/run/phase_change.h), each with its step: every
  // probe_interval steps, or, in runs from before those, each eval's.
  std::vector<nlohmann::json> probe;
  nlohmann::json phase_change;  // its metrics.jsonl record, less kind; null when none was found
};

// The run's snapshots of the heads, gathered over steps.
struct SnapshotsView {
  std::vector<int64_t> steps;
  torch::Tensor text, probe;                    // the probes' tokens (of the last snapshot)
  std::map<std::string, torch::Tensor> scores;  // name -> (S, L, nh)
  std::map<std::string, torch::Tensor> formed;  // previous_token, induction -> (L, nh) steps
  std::vector<torch::Tensor> text_patterns, probe_patterns, position_patterns;  // per step
};

struct Inspection {
  std::filesystem::path run_dir;
  std::optional<int64_t> step;  // from state.json, when there is one
  std::optional<AttentionView> attention;
  std::optional<HeadsView> heads;
  std::optional<AblationView> ablation;
  std::optional<Priors> priors;
  std::optional<LensView> lens;
  std::optional<PatchingView> patching;
  std::optional<CompositionScores> composition;
  std::optional<TokenCircuits> circuits;
  std::optional<PositionGeometry> positions;
  std::optional<EmbeddingGeometry> embeddings;
  std::optional<AttributionView> attribution;
  std::optional<PositionLossView> position_loss;
  std::optional<DriftView> drift;
  std::optional<AnalogyView> analogy;
  std::optional<FeaturesView> features;
  std::optional<SnapshotsView> snapshots;  // absent when the run has none
  std::optional<TrainingCurves> training;  // asked for, but absent: notes say so
  bool training_asked = false;
  std::vector<std::string> notes;  // said on stderr, and shown in the report
};

// A token as a label: every whitespace and control character made visible (" the" -> "␣the",
// "\n" -> "↵", "\x01"), so that no piece looks blank or like another in a table.
std::string visible_token(const std::string& piece);

// The prompt's ids (T,) as the views read them: longer than block_size keeps the last
// block_size tokens, with a note. The one place inspect encodes a prompt.
torch::Tensor encode_prompt(Inspection& out, const LoadedRun& run, const std::string& prompt);
// The prompt views read `ids` (T,), at most block_size tokens, from `pass`: the one forward
// pass over them that kept every hook point (tools/inspect/prompt_runs.h).
AttentionView inspect_attention(const LoadedRun& run, const torch::Tensor& ids,
                                const CachedRun& pass);
// Head scores and ablation from one survey of the windows and one of the probe: either or
// both. `exact` heads are ablated exactly (-1: all), the rest estimated. The surveys and
// the ablation table come from `kept` when it holds them, and are kept there.
std::pair<std::optional<HeadsView>, std::optional<AblationView>> inspect_windows(
    LoadedRun& run, const InspectData& data, bool heads, bool ablate, int64_t exact,
    InspectionCache* kept = nullptr);
Priors inspect_priors(Inspection& out, LoadedRun& run);
LensView inspect_logit_lens(LoadedRun& run, const torch::Tensor& ids, const CachedRun& pass,
                            int64_t k = 5);
AttributionView inspect_attribution(LoadedRun& run, const torch::Tensor& ids,
                                    const CachedRun& pass);
// The texts must encode to the same number of tokens, at most block_size; position -1 is
// the last token.
PatchingView inspect_patching(LoadedRun& run, const std::string& clean, const std::string& corrupt,
                              int64_t position);
// The tokens of the text that the loss by position and context drift read by default
// (inspect --tokens): on the default Shakespeare run 2^14 puts each bucket of 8 positions'
// mean loss within about 0.07 nats (measured against 2^16), and both views in a quarter
// second each on two cores (docs/MEASUREMENTS.md).
inline constexpr int64_t kViewTokens = int64_t{1} << 14;

// Consecutive, non-overlapping windows (n, length) from the first `budget` of `tokens` (N,);
// an error naming `source` and `why` when not one fits.
torch::Tensor consecutive_windows(const torch::Tensor& tokens, int64_t length, int64_t budget,
                                  const std::string& source, const std::string& why);

// Consecutive windows of `context` + 1 tokens from the first `budget` of `tokens`; context
// past block_size only where the positions extrapolate (tools/cli.h).
PositionLossView inspect_position_loss(LoadedRun& run, const torch::Tensor& tokens,
                                       const std::string& source, int64_t context,
                                       int64_t budget = kViewTokens);
// `token` must be one token; empty: the most frequent one. Over consecutive block_size
// windows of the first `budget` tokens.
DriftView inspect_context_drift(LoadedRun& run, const torch::Tensor& tokens,
                                const std::string& source, const std::string& token,
                                int64_t budget = kViewTokens);
// The SAE `sae` (a directory, or a name under run_dir/saes/) on consecutive block_size
// windows of the first `budget` tokens. Throws naming the SAE when it does not fit the model
// (no such hook point, another width).
FeaturesView inspect_features(LoadedRun& run, const std::filesystem::path& run_dir,
                              const std::string& sae, const torch::Tensor& tokens,
                              const std::string& source, int64_t budget = kViewTokens);
// "a:b::c" (a is to b as c is to ...), each one token.
AnalogyView inspect_analogy(LoadedRun& run, const std::string& spec);
std::optional<SnapshotsView> read_snapshots(Inspection& out, const std::filesystem::path& run_dir);
std::optional<TrainingCurves> read_training_curves(Inspection& out,
                                                   const std::filesystem::path& run_dir);

}  // namespace tinylm
