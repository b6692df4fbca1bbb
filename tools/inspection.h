#pragma once
// The views of `tinylm inspect` as one JSON document (the format is in the README): the
// attention maps of a prompt, head scores, ablation, priors, the logit lens, and the
// training curves from metrics.jsonl. Large T x T tables are kept aside as tensors so the
// JSON file can spell them out and the HTML report can pack them as bytes.

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "model/ablation.h"
#include "train/checkpoint.h"

namespace tinylm {

struct Heatmaps {
  nlohmann::json::json_pointer where;  // its place in the document
  torch::Tensor values;                // (L, nh, rows, cols)
  bool unit = false;                   // values in [0, 1] (patterns); else scaled per head
};

struct Inspection {
  nlohmann::json doc;
  std::vector<Heatmaps> heatmaps;
  std::vector<std::string> notes;  // said on stderr, and shown in the report
};

// A token as a label: whitespace and control characters made visible (" " -> "␣", "\n" -> "↵").
std::string visible_token(const std::string& piece);

struct InspectData {
  torch::Tensor windows;  // (N, T + 1) from the data, for head scores and ablation
  std::string source;     // where they came from, for the reader
  torch::Tensor probe;    // (n, 2R), repeated random tokens
};

void add_run_summary(Inspection& out, const std::filesystem::path& run_dir, const LoadedRun& run);
// `prompt` must already be encodable; longer than block_size keeps the last block_size tokens.
void add_attention(Inspection& out, LoadedRun& run, const std::string& prompt);
void add_head_scores(Inspection& out, LoadedRun& run, const InspectData& data);
void add_ablation(Inspection& out, LoadedRun& run, const InspectData& data);
void add_priors(Inspection& out, LoadedRun& run);
void add_logit_lens(Inspection& out, LoadedRun& run, const std::string& prompt, int64_t k = 5);
void add_training(Inspection& out, const std::filesystem::path& run_dir);

// The document with every heatmap spelled out as nested arrays (4 decimals).
nlohmann::json spelled_out(const Inspection& inspection);

// Nested arrays of a tensor, rounded to `decimals`.
nlohmann::json tensor_to_json(const torch::Tensor& t, int decimals);

}  // namespace tinylm
