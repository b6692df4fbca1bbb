#include "tools/inspect/inspection.h"

#include <algorithm>
#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "model/activation_cache.h"
#include "tools/cli.h"
#include "tools/inspect/inspection_cache.h"
#include "train/run/evaluate.h"

namespace tinylm {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// The metrics file of a run directory; best/ has none of its own: its run's is one level up.
fs::path metrics_path(const fs::path& run_dir) {
  fs::path dir = fs::absolute(run_dir).lexically_normal();
  if (dir.filename().empty()) dir = dir.parent_path();  // "runs/x/best/"
  const fs::path path = dir / "metrics.jsonl";
  if (!fs::exists(path) && dir.filename() == "best") return dir.parent_path() / "metrics.jsonl";
  return path;
}

}  // namespace

torch::Tensor consecutive_windows(const torch::Tensor& tokens, int64_t length, int64_t budget,
                                  const std::string& source, const std::string& why) {
  const int64_t n = std::min(tokens.numel(), budget) / length;
  if (n == 0) {
    throw std::runtime_error(source + " has " + std::to_string(tokens.numel()) + " tokens; " + why +
                             " needs windows of " + std::to_string(length));
  }
  return tokens.slice(0, 0, n * length).view({n, length});
}

namespace {

// The one token `text` encodes to, or an error naming what it encodes to instead.
int64_t single_token(const LoadedRun& run, const std::string& text, const std::string& flag) {
  const std::vector<int64_t> ids = run.tokenizer->encode(text, flag);
  if (ids.size() == 1) return ids.front();
  std::string pieces;
  for (const int64_t id : ids)
    pieces += (pieces.empty() ? "" : " ") + run.tokenizer->token_label(id);
  throw std::runtime_error(flag + " \"" + text + "\" is " + std::to_string(ids.size()) +
                           " tokens in this run's tokenizer (" + pieces + "); give one token");
}

}  // namespace

PositionLossView inspect_position_loss(LoadedRun& run, const torch::Tensor& tokens,
                                       const std::string& source, int64_t context, int64_t budget) {
  const torch::Tensor windows =
      consecutive_windows(tokens, context + 1, budget, source, "--positions");
  return {source, context, loss_by_position(run.model, windows)};
}

DriftView inspect_context_drift(LoadedRun& run, const torch::Tensor& tokens,
                                const std::string& source, const std::string& token,
                                int64_t budget) {
  const torch::Tensor windows = consecutive_windows(tokens, run.model->config().block_size, budget,
                                                    source, "--context-drift");
  const int64_t id = token.empty() ? torch::bincount(windows.flatten()).argmax().item<int64_t>()
                                   : single_token(run, token, "--context-drift");
  try {
    return {source, context_drift(run.model, windows, id)};
  } catch (const std::invalid_argument& e) {
    // The analysis knows ids; the person typed text: name both.
    throw std::runtime_error("--context-drift \"" + visible_token(run.tokenizer->token_label(id)) +
                             "\" in " + source + ": " + e.what());
  }
}

FeaturesView inspect_features(LoadedRun& run, const fs::path& run_dir, const std::string& sae,
                              const torch::Tensor& tokens, const std::string& source,
                              int64_t budget) {
  const fs::path named = run_dir / "saes" / sae;
  const fs::path dir =
      sae.find('/') == std::string::npos && fs::is_directory(named) ? named : fs::path(sae);
  LoadedSae loaded = load_sae(dir);
  FeaturesView view;
  view.dir = dir.string();
  view.source = source;
  view.origin = loaded.origin;
  view.shape = loaded.sae.shape;
  view.metrics = loaded.metrics;
  std::optional<HookRows> hook;
  try {
    hook.emplace(run.model, loaded.origin.hook);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error("the SAE in " + dir.string() + " reads " + loaded.origin.hook +
                             ", which this model cannot give: " + e.what());
  }
  if (hook->width() != view.shape.d_in) {
    throw std::runtime_error("the SAE in " + dir.string() + " reads " +
                             std::to_string(view.shape.d_in) + " numbers at " + loaded.origin.hook +
                             ", where this model has " + std::to_string(hook->width()) +
                             ": it belongs to another model");
  }
  const int64_t T = run.model->config().block_size;
  const torch::Tensor windows = consecutive_windows(tokens, T + 1, budget, source, "--features");
  view.analysis = analyse_features(run.model, *hook, loaded.sae, windows);
  return view;
}

AnalogyView inspect_analogy(LoadedRun& run, const std::string& spec) {
  const size_t pair = spec.find("::");
  const size_t first = spec.find(':');
  if (pair == std::string::npos || first >= pair || spec.find(':', pair + 2) != std::string::npos) {
    throw UsageError(
        "--analogy takes a:b::c, \"a is to b as c is to ...\" (e.g. "
        "man:king::woman), got \"" +
        spec + "\"");
  }
  AnalogyView v;
  v.a = single_token(run, spec.substr(0, first), "--analogy");
  v.b = single_token(run, spec.substr(first + 1, pair - first - 1), "--analogy");
  v.c = single_token(run, spec.substr(pair + 2), "--analogy");
  try {
    v.nearest = embedding_analogy(run.model, v.a, v.b, v.c);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error("--analogy " + spec + ": " + e.what());
  }
  return v;
}

std::string visible_token(const std::string& piece) {
  // Every character, not only a piece that is one: a SentencePiece or GPT-2 piece with a
  // leading space (" the") would otherwise look like "the" in a table, and " " like nothing.
  std::string out;
  for (const char ch : piece) {
    const auto byte = static_cast<unsigned char>(ch);
    if (ch == ' ') {
      out += "\u2423";
    } else if (ch == '\n') {
      out += "\u21b5";
    } else if (ch == '\t') {
      out += "\u2192";
    } else if (ch == '\r') {
      out += "\u240d";
    } else if (byte < 0x20 || byte == 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", byte);
      out += hex;
    } else {
      out += ch;
    }
  }
  return out;
}

torch::Tensor encode_prompt(Inspection& out, const LoadedRun& run, const std::string& prompt) {
  std::vector<int64_t> ids = run.tokenizer->encode(prompt, "the prompt");
  const size_t T = static_cast<size_t>(run.model->config().block_size);
  if (ids.empty()) throw std::invalid_argument("the prompt is empty");
  if (ids.size() > T) {
    out.notes.push_back("the prompt has " + std::to_string(ids.size()) +
                        " tokens, more than block_size " + std::to_string(T) +
                        ": inspected its last " + std::to_string(T));
    ids.erase(ids.begin(), ids.end() - static_cast<std::ptrdiff_t>(T));
  }
  return torch::tensor(ids, torch::kInt64);  // (T,)
}

AttentionView inspect_attention(const LoadedRun& run, const torch::Tensor& ids,
                                const CachedRun& pass) {
  std::vector<torch::Tensor> layers;
  for (int64_t l = 0; l < run.model->config().n_layer; ++l)
    layers.push_back(pass.cache.at(hook_name(l, "attn.hook_pattern"))[0]);
  return {ids, torch::stack(layers)};
}

std::pair<std::optional<HeadsView>, std::optional<AblationView>> inspect_windows(
    LoadedRun& run, const InspectData& data, bool heads, bool ablate, int64_t exact,
    InspectionCache* kept) {
  InspectionCache own;
  InspectionCache& cache = kept ? *kept : own;
  const int64_t T = data.windows.size(1) - 1, R = data.probe.size(1) / 2;
  const auto survey = [&](bool scores, bool attribution) {
    SurveyOptions on_windows = attribution ? ablation_survey_options(false, 0) : SurveyOptions{};
    SurveyOptions on_probe =
        attribution ? ablation_survey_options(true, data.probe.size(1)) : SurveyOptions{};
    on_windows.scores = on_probe.scores = scores ? head_score_names() : std::vector<std::string>{};
    on_probe.induction_from = R;
    return WindowSetSurveys{
        survey_windows(run.model, data.windows.slice(1, 0, T), data.windows.slice(1, 1, T + 1),
                       on_windows),
        survey_windows(run.model, data.probe, probe_targets(data.probe), on_probe), scores,
        attribution};
  };
  const std::shared_ptr<const WindowSetSurveys> surveys =
      cache.surveys(data, heads, ablate, survey);
  std::pair<std::optional<HeadsView>, std::optional<AblationView>> out;
  if (heads) {
    out.first = HeadsView{data.source,
                          surveys->windows.scores,
                          {surveys->probe.scores, probe_losses(surveys->probe)},
                          data.probe.size(0),
                          data.probe.size(1)};
  }
  if (ablate) {
    const auto table = cache.ablation(data, exact, [&] {
      return ablation_table(run.model, data.windows, data.probe, exact, &surveys->windows,
                            &surveys->probe);
    });
    out.second =
        AblationView{data.source, data.windows.size(0), data.window_starts, data.probe, *table};
  }
  return out;
}

Priors inspect_priors(Inspection& out, LoadedRun& run) {
  Priors priors = head_priors(run.model);
  if (!priors.position_pattern.defined())
    out.notes.push_back("pos_encoding = none: there are no position priors");
  if (!priors.token_scores.defined()) {
    out.notes.push_back("the vocabulary is too large for token-to-token QK tables");
  }
  return priors;
}

LensView inspect_logit_lens(LoadedRun& run, const torch::Tensor& ids, const CachedRun& pass,
                            int64_t k) {
  return {ids, logit_lens(run.model, pass.cache, ids.unsqueeze(0), k)};
}

AttributionView inspect_attribution(LoadedRun& run, const torch::Tensor& ids,
                                    const CachedRun& pass) {
  if (ids.numel() < 2)
    throw std::invalid_argument("logit attribution needs a prompt of at least 2 tokens");
  return {ids, logit_attribution(run.model, pass, ids)};
}

PatchingView inspect_patching(LoadedRun& run, const std::string& clean, const std::string& corrupt,
                              int64_t position) {
  const std::vector<int64_t> a = run.tokenizer->encode(clean, "the clean text (--clean)"),
                             b = run.tokenizer->encode(corrupt, "the corrupted text (--corrupt)");
  if (a.size() != b.size()) {
    throw std::invalid_argument("--clean is " + std::to_string(a.size()) +
                                " tokens and --corrupt " + std::to_string(b.size()) +
                                ": patching needs texts of the same number of tokens");
  }
  PatchingView v{torch::tensor(a, torch::kInt64), torch::tensor(b, torch::kInt64), {}};
  const int64_t P = position >= 0 ? position : static_cast<int64_t>(a.size()) - 1;
  const Tokenizer& tokenizer = *run.tokenizer;
  v.result = activation_patching(run.model, v.clean, v.corrupt, P, 64, [&](int64_t id) {
    return "\"" + visible_token(tokenizer.token_label(id)) + "\"";
  });
  return v;
}

std::optional<SnapshotsView> read_snapshots(Inspection& out, const fs::path& run_dir) {
  fs::path dir = fs::absolute(run_dir).lexically_normal();
  if (dir.filename().empty()) dir = dir.parent_path();
  if (!fs::is_directory(dir / "snapshots") && dir.filename() == "best") dir = dir.parent_path();
  const std::vector<StoredSnapshot> stored = load_snapshots(dir);
  if (stored.empty()) {
    out.notes.push_back("no snapshots in " + run_dir.string() +
                        ": the report cannot replay training (train.snapshots)");
    return std::nullopt;
  }
  SnapshotsView v;
  v.text = stored.back().text;
  v.probe = stored.back().probe;
  std::map<std::string, std::vector<torch::Tensor>> series;
  for (const StoredSnapshot& s : stored) {
    v.steps.push_back(s.step);
    v.text_patterns.push_back(s.heads.text_pattern);
    v.probe_patterns.push_back(s.heads.probe_pattern);
    if (s.heads.position_pattern.defined()) v.position_patterns.push_back(s.heads.position_pattern);
    series["ov_copying"].push_back(s.heads.ov_copying);
    series["entropy"].push_back(s.heads.entropy);
    series["mean_distance"].push_back(s.heads.mean_distance);
    series["previous_token"].push_back(s.heads.previous_token);
    series["induction"].push_back(s.heads.induction);
  }
  for (const auto& [name, list] : series) v.scores[name] = torch::stack(list);
  for (const char* name : {"previous_token", "induction"})
    v.formed[name] = formation_steps(v.steps, v.scores[name]);
  return v;
}

std::optional<TrainingCurves> read_training_curves(Inspection& out, const fs::path& run_dir) {
  const fs::path path = metrics_path(run_dir);
  std::ifstream in(path);
  if (!in) {
    out.notes.push_back("no metrics.jsonl in " + run_dir.string() +
                        ": the report has no training curves");
    return std::nullopt;
  }
  TrainingCurves curves;
  std::vector<json> eval_probes;
  std::string line;
  int64_t line_number = 0, skipped = 0;
  while (std::getline(in, line)) {
    ++line_number;
    const json record = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (record.is_discarded() || !record.is_object() || !record.contains("step") ||
        !record["step"].is_number_integer()) {
      ++skipped;
      continue;
    }
    const int64_t step = record["step"].get<int64_t>();
    const std::string kind = record.value("kind", "");
    if (kind == "train" && record.contains("loss")) {
      curves.train.emplace_back(step, record.value("loss", 0.0));
    } else if (kind == "eval") {
      curves.eval.push_back({step, record.value("val_loss", 0.0), record.value("train_loss", 0.0)});
      if (record.contains("probe")) {
        json probe = record["probe"];
        probe["step"] = step;
        eval_probes.push_back(probe);
      }
    } else if (kind == "probe" || kind == "phase_change") {
      json kept = record;
      kept.erase("kind");
      if (kind == "probe")
        curves.probe.push_back(kept);
      else
        curves.phase_change = kept;
    }
  }
  if (curves.probe.empty()) curves.probe = std::move(eval_probes);  // a run from before readings
  if (skipped > 0) {
    out.notes.push_back(std::to_string(skipped) + " of " + std::to_string(line_number) +
                        " lines of " + path.string() + " are not metrics records and were skipped");
  }
  return curves;
}

}  // namespace tinylm
