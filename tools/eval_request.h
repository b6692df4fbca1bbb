#pragma once
// What `tinylm eval` asks for, and scoring it: one code path for the CLI and the lab's
// GET /api/eval, which binds the same flags to query parameters (see
// tools/inspect/inspect_request.h).

#include <filesystem>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "train/run/checkpoint.h"

namespace tinylm {

struct EvalArgs {
  std::string split = "val", text;
  int64_t context = 0;  // 0: block_size
};

// --split, --text and --context.
void add_eval_options(CLI::App* cmd, EvalArgs& args);

// Scores every token of the split (or --text) once: loss, perplexity, bits per token and
// per byte, the tokens scored, the window, the text's bytes, the tokenizer; and where the
// tokens came from ("source", not part of eval --json's object). `run_dir` names the run
// in errors.
struct EvalResult {
  nlohmann::json scores;  // what `eval --json` prints
  std::string source;
  TokenSequence tokens;  // what was scored (--logits writes its first window)
  int64_t context = 0;
};
EvalResult run_eval_request(LoadedRun& run, const std::filesystem::path& run_dir,
                            const EvalArgs& args);

}  // namespace tinylm
