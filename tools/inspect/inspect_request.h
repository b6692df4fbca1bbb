#pragma once
// What an inspection asks for, and computing it: one code path for its two front ends. The
// CLI's `tinylm inspect` binds these flags to its command line; the lab's GET /api/inspect
// binds the same flags, by the same registration, to a request's query parameters. Both
// then call run_inspection and write inspection_json: the lab's answer is the CLI's --json.

#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

#include "tools/inspect/inspection.h"
#include "tools/inspect/inspection_cache.h"
#include "train/run/checkpoint.h"
#include "train/run/run_config.h"

namespace tinylm {

struct InspectArgs {
  std::string run, prompt, text, html, json, clean, corrupt, drift_token, analogy;
  std::string features;  // an SAE: its directory, or its name under RUN/saes/
  bool heads = false, ablate = false, priors = false, logit_lens = false, all = false,
       patch = false, composition = false, attribution = false, circuits = false, geometry = false,
       positions = false, drift = false, training = false;
  std::string ablate_heads;                         // L.H[,L.H...]: ablated in every view computed
  std::string ablation = "zero";                    // how: zero, or mean (over the windows)
  std::string exact = std::to_string(kExactHeads);  // heads --ablate runs exactly, or "all"
  int64_t windows = 32, probes = 8, seed = kDefaultSeed, position = -1, context = 0;
  int64_t tokens = kViewTokens;  // of the text, for --positions, --context-drift, --features
  int threads = 0;
  std::string device = "cpu";
};

// The flags of the views, of the text they read, and of the ablation: every option but RUN,
// --html, --json, --threads and --device, which the CLI adds itself. Numbers are checked as
// the CLI checks them (tools/cli.h); a bad one is a CLI11 error naming its flag.
void add_inspect_options(CLI::App* cmd, InspectArgs& args);

// Throws a UsageError when the flags ask for no view, or for a combination that does not go
// together; run_inspection checks this first too.
void check_inspect_args(const InspectArgs& args);

// --exact: a number of heads, or "all" (-1). Throws UsageError otherwise.
int64_t exact_heads(const std::string& flag);

// The windows and probe that head scores and ablation read, as run_inspection draws them
// (--text or the val split, --windows, --probes, --seed).
InspectData inspect_data(const LoadedRun& run, const std::filesystem::path& run_dir,
                         const InspectArgs& args);

// Checks the combination of flags (a UsageError says what is missing or stray) and computes
// every view asked for on `run`, with the heads of --ablate-heads ablated throughout.
// `run_dir` is the run's directory (its state.json, metrics.jsonl and snapshots). The model
// is only read: hooks are this thread's, so requests may share it. The prompt's pass, the
// window set's surveys, the ablation table and the text's views come from `kept` when given
// (the lab's, per checkpoint) and it holds them, and are kept there; unless heads are ablated.
Inspection run_inspection(LoadedRun& run, const std::filesystem::path& run_dir,
                          const InspectArgs& args, InspectionCache* kept = nullptr);

}  // namespace tinylm
