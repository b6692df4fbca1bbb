#include "tools/inspection.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>

#include <spdlog/spdlog.h>

#include "model/activation_cache.h"
#include "model/head_scores.h"
#include "model/induction_probe.h"
#include "model/logit_lens.h"
#include "model/priors.h"

namespace tinylm {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

double rounded(double x, int decimals) {
  const double scale = std::pow(10.0, decimals);
  return std::isfinite(x) ? std::round(x * scale) / scale : x;
}

// (L, nh) -> [[...], ...] with NaN as null (JSON has no NaN).
json head_table(const torch::Tensor& t) {
  json rows = json::array();
  const torch::Tensor d = t.to(torch::kFloat64).contiguous();
  for (int64_t l = 0; l < d.size(0); ++l) {
    json row = json::array();
    for (int64_t h = 0; h < d.size(1); ++h) {
      const double x = d[l][h].item<double>();
      row.push_back(std::isnan(x) ? json(nullptr) : json(rounded(x, 6)));
    }
    rows.push_back(row);
  }
  return rows;
}

// The highest entry of an (L, nh) table: {"layer", "head", "score"}.
json strongest(const torch::Tensor& t) {
  const torch::Tensor flat = torch::nan_to_num(t.to(torch::kFloat64), -1.0).flatten();
  const int64_t i = flat.argmax().item<int64_t>();
  return {{"layer", i / t.size(1)}, {"head", i % t.size(1)}, {"score", rounded(flat[i].item<double>(), 6)}};
}

json token_labels(const Tokenizer& tokenizer, const torch::Tensor& ids) {
  json tokens = json::array();
  for (int64_t i = 0; i < ids.numel(); ++i) tokens.push_back(tokenizer.token_label(ids[i].item<int64_t>()));
  return tokens;
}

torch::Tensor encode_prompt(Inspection& out, const LoadedRun& run, const std::string& prompt) {
  std::vector<int64_t> ids = run.tokenizer->encode(prompt, "the prompt");
  const size_t T = static_cast<size_t>(run.model->config().block_size);
  if (ids.empty()) throw std::invalid_argument("the prompt is empty");
  if (ids.size() > T) {
    const std::string note = "the prompt has " + std::to_string(ids.size()) + " tokens, more than "
                             "block_size " + std::to_string(T) + ": inspected its last " +
                             std::to_string(T);
    if (std::find(out.notes.begin(), out.notes.end(), note) == out.notes.end()) out.notes.push_back(note);
    ids.erase(ids.begin(), ids.end() - static_cast<std::ptrdiff_t>(T));
  }
  return torch::tensor(ids, torch::kInt64).unsqueeze(0);  // (1, T)
}

}  // namespace

std::string visible_token(const std::string& piece) {
  if (piece == " ") return "\u2423";
  if (piece == "\n") return "\u21b5";
  if (piece == "\t") return "\u2192";
  if (piece == "\r") return "\u240d";
  if (piece.size() == 1 && static_cast<unsigned char>(piece[0]) < 0x20) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "\\x%02x", static_cast<unsigned char>(piece[0]));
    return hex;
  }
  return piece;
}

json tensor_to_json(const torch::Tensor& t, int decimals) {
  if (t.dim() == 0) return rounded(t.item<double>(), decimals);
  json out = json::array();
  for (int64_t i = 0; i < t.size(0); ++i) out.push_back(tensor_to_json(t[i], decimals));
  return out;
}

void add_run_summary(Inspection& out, const fs::path& run_dir, const LoadedRun& run) {
  out.doc["format"] = "tinylm-inspect/1";
  out.doc["run"] = fs::absolute(run_dir).lexically_normal().string();
  out.doc["model"] = model_config_to_json(run.model->config());
  out.doc["vocab"] = token_labels(*run.tokenizer, torch::arange(run.tokenizer->vocab_size()));
  out.doc["step"] = nullptr;
  if (fs::is_regular_file(run_dir / "state.json")) {
    out.doc["step"] = load_training_state(run_dir).step;
  }
}

void add_attention(Inspection& out, LoadedRun& run, const std::string& prompt) {
  const torch::Tensor tokens = encode_prompt(out, run, prompt);  // (1, T)
  const int64_t L = run.model->config().n_layer;
  const CachedRun cached = run_with_cache(run.model, tokens, names_ending_with("attn.hook_pattern"));
  std::vector<torch::Tensor> layers;
  for (int64_t l = 0; l < L; ++l) layers.push_back(cached.cache.at(hook_name(l, "attn.hook_pattern"))[0]);
  out.doc["attention"] = {{"tokens", token_labels(*run.tokenizer, tokens[0])},
                          {"ids", tensor_to_json(tokens[0], 0)},
                          {"patterns", nullptr}};
  out.heatmaps.push_back({json::json_pointer("/attention/patterns"), torch::stack(layers), true});
}

void add_head_scores(Inspection& out, LoadedRun& run, const InspectData& data) {
  const int64_t T = data.windows.size(1) - 1;
  const HeadScores scores = head_scores(run.model, data.windows.slice(1, 0, T));
  json by_name, best;
  for (const auto& [name, table] : scores.values) {
    by_name[name] = head_table(table);
    if (name != "entropy") best[name] = strongest(table);
  }
  const ProbeResult probe = run_induction_probe(run.model, data.probe);
  json probe_scores, probe_best;
  for (const auto& [name, table] : probe.scores.values) {
    probe_scores[name] = head_table(table);
    if (name != "entropy") probe_best[name] = strongest(table);
  }
  out.doc["heads"] = {
      {"source", data.source},
      {"windows", scores.sequences},
      {"length", scores.length},
      {"scores", by_name},
      {"strongest", best},
      {"probe",
       {{"sequences", data.probe.size(0)},
        {"length", data.probe.size(1)},
        {"scores", probe_scores},
        {"strongest", probe_best},
        {"loss_first_half", rounded(probe.losses.first_half, 6)},
        {"loss_second_half", rounded(probe.losses.second_half, 6)}}}};
}

void add_ablation(Inspection& out, LoadedRun& run, const InspectData& data) {
  const AblationTable table = ablation_table(run.model, data.windows, data.probe);
  json rows = json::array();
  for (const HeadAblation& a : table.heads) {
    rows.push_back({{"layer", a.head.layer},
                    {"head", a.head.head},
                    {"zero", rounded(a.zero, 6)},
                    {"mean", rounded(a.mean, 6)},
                    {"probe_zero", rounded(a.probe_zero, 6)},
                    {"probe_mean", rounded(a.probe_mean, 6)}});
  }
  out.doc["ablation"] = {{"source", data.source},
                         {"windows", data.windows.size(0)},
                         {"loss", rounded(table.loss, 6)},
                         {"probe_loss", rounded(table.probe_loss, 6)},
                         {"heads", rows}};
}

void add_priors(Inspection& out, LoadedRun& run) {
  const Priors priors = head_priors(run.model);
  json doc = {{"positions", nullptr},
              {"tokens", nullptr},
              {"ov", {{"copying", head_table(priors.ov_copying)}, {"top1", head_table(priors.ov_top1)}}}};
  if (priors.position_pattern.defined()) {
    doc["positions"] = {{"length", priors.position_pattern.size(2)},
                        {"previous_token", head_table(priors.position_previous_token)},
                        {"patterns", nullptr}};
    out.heatmaps.push_back({json::json_pointer("/priors/positions/patterns"), priors.position_pattern, true});
  } else {
    out.notes.push_back("pos_encoding = none: there are no position priors");
  }
  if (priors.token_scores.defined()) {
    doc["tokens"] = {{"scores", nullptr}};
    out.heatmaps.push_back({json::json_pointer("/priors/tokens/scores"), priors.token_scores, false});
  } else {
    out.notes.push_back("the vocabulary is too large for token-to-token QK tables");
  }
  out.doc["priors"] = doc;
}

void add_logit_lens(Inspection& out, LoadedRun& run, const std::string& prompt, int64_t k) {
  const torch::Tensor tokens = encode_prompt(out, run, prompt);  // (1, T)
  const LogitLens lens = logit_lens(run.model, tokens, k);
  json stages = json::array();
  for (size_t s = 0; s < lens.stages.size(); ++s) {
    json positions = json::array();
    for (int64_t t = 0; t < tokens.size(1); ++t) {
      json top = json::array();
      for (int64_t j = 0; j < lens.top_ids.size(2); ++j) {
        top.push_back({{"token", run.tokenizer->token_label(lens.top_ids[s][t][j].item<int64_t>())},
                       {"p", rounded(lens.top_probs[s][t][j].item<double>(), 4)}});
      }
      positions.push_back(top);
    }
    stages.push_back({{"name", lens.stages[s]}, {"top", positions}});
  }
  out.doc["logit_lens"] = {{"tokens", token_labels(*run.tokenizer, tokens[0])}, {"k", k}, {"stages", stages}};
}

void add_training(Inspection& out, const fs::path& run_dir) {
  // best/ has no metrics.jsonl of its own: its run's is one level up.
  fs::path dir = fs::absolute(run_dir).lexically_normal();
  if (dir.filename().empty()) dir = dir.parent_path();  // "runs/x/best/"
  fs::path path = dir / "metrics.jsonl";
  if (!fs::exists(path) && dir.filename() == "best") path = dir.parent_path() / "metrics.jsonl";
  std::ifstream in(path);
  if (!in) {
    out.notes.push_back("no metrics.jsonl in " + run_dir.string() + ": the report has no training curves");
    out.doc["training"] = nullptr;
    return;
  }
  json train = json::array(), val = json::array(), probe = json::array();
  std::string line;
  int64_t line_number = 0, skipped = 0;
  while (std::getline(in, line)) {
    ++line_number;
    const json record = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (record.is_discarded() || !record.is_object() || !record.contains("step")) {
      ++skipped;
      continue;
    }
    if (record.value("kind", "") == "train" && record.contains("loss")) {
      train.push_back({record["step"], record["loss"]});
    } else if (record.value("kind", "") == "eval") {
      val.push_back({record["step"], record.value("val_loss", 0.0), record.value("train_loss", 0.0)});
      if (record.contains("probe")) {
        json p = record["probe"];
        p["step"] = record["step"];
        probe.push_back(p);
      }
    }
  }
  if (skipped > 0) {
    out.notes.push_back(std::to_string(skipped) + " of " + std::to_string(line_number) + " lines of " +
                        path.string() + " are not metrics records and were skipped");
  }
  out.doc["training"] = {{"train", train}, {"eval", val}, {"probe", probe}};
}

json spelled_out(const Inspection& inspection) {
  json doc = inspection.doc;
  for (const Heatmaps& h : inspection.heatmaps) doc[h.where] = tensor_to_json(h.values, 4);
  doc["notes"] = inspection.notes;
  return doc;
}

}  // namespace tinylm
