#include "tools/inspect/inspection_json.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <unordered_map>

namespace tinylm {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

double rounded(double x, int decimals) {
  const double scale = std::pow(10.0, decimals);
  return std::isfinite(x) ? std::round(x * scale) / scale : x;
}

// Nested arrays of `data` (row-major, `shape` from dimension `dim` on), NaN as null.
json nested(const double*& data, const std::vector<int64_t>& shape, size_t dim, int decimals) {
  if (dim == shape.size()) {
    const double x = *data++;
    return std::isnan(x) ? json(nullptr) : json(rounded(x, decimals));
  }
  json out = json::array();
  for (int64_t i = 0; i < shape[dim]; ++i) out.push_back(nested(data, shape, dim + 1, decimals));
  return out;
}

// The highest entry of an (L, nh) table: {"layer", "head", "score"}.
json strongest(const torch::Tensor& t) {
  const torch::Tensor flat = torch::nan_to_num(t.to(torch::kFloat64), -1.0).flatten();
  const int64_t i = flat.argmax().item<int64_t>();
  return {{"layer", i / t.size(1)},
          {"head", i % t.size(1)},
          {"score", rounded(flat[i].item<double>(), 6)}};
}

json head_table(const torch::Tensor& t) { return tensor_to_json(t, 6); }

json token_labels(const Tokenizer& tokenizer, const torch::Tensor& ids) {
  json tokens = json::array();
  const torch::Tensor flat = ids.to(torch::kInt64).contiguous();
  for (int64_t i = 0; i < flat.numel(); ++i)
    tokens.push_back(tokenizer.token_label(flat.data_ptr<int64_t>()[i]));
  return tokens;
}

json scores_json(const HeadScores& scores, json& best) {
  json by_name;
  for (const auto& [name, table] : scores.values) {
    by_name[name] = head_table(table);
    if (name != "entropy") best[name] = strongest(table);
  }
  return by_name;
}

json heads_json(const HeadsView& h) {
  json best, probe_best;
  const json scores = scores_json(h.scores, best),
             probe_scores = scores_json(h.probe.scores, probe_best);
  return {{"source", h.source},
          {"windows", h.scores.sequences},
          {"length", h.scores.length},
          {"scores", scores},
          {"strongest", best},
          {"probe",
           {{"sequences", h.probe_sequences},
            {"length", h.probe_length},
            {"scores", probe_scores},
            {"strongest", probe_best},
            {"loss_first_half", rounded(h.probe.losses.first_half, 6)},
            {"loss_second_half", rounded(h.probe.losses.second_half, 6)}}}};
}

// {spearman, k, both: [labels of the items both top k pick]}.
json agreement_json(const RankAgreement& a, const std::function<json(int64_t)>& item) {
  json both = json::array();
  for (const int64_t i : a.both) both.push_back(item(i));
  return {{"spearman", std::isnan(a.spearman) ? json(nullptr) : json(rounded(a.spearman, 4))},
          {"k", a.k},
          {"both", both}};
}

json ablation_json(const AblationView& a) {
  json rows = json::array();
  const auto value = [](double x) { return std::isnan(x) ? json(nullptr) : json(rounded(x, 6)); };
  for (const HeadAblation& r : a.table.heads) {
    rows.push_back({{"layer", r.head.layer},
                    {"head", r.head.head},
                    {"exact", r.exact},
                    {"zero", value(r.zero)},
                    {"mean", value(r.mean)},
                    {"probe_zero", value(r.probe_zero)},
                    {"probe_mean", value(r.probe_mean)},
                    {"estimate",
                     {{"zero", rounded(r.estimate.zero, 6)},
                      {"mean", rounded(r.estimate.mean, 6)},
                      {"probe_zero", rounded(r.estimate.probe_zero, 6)},
                      {"probe_mean", rounded(r.estimate.probe_mean, 6)}}}});
  }
  // The agreement's items are the exact rows, in the table's order.
  const auto label = [&](int64_t i) {
    const HeadAblation& r = a.table.heads[static_cast<size_t>(i)];
    return json{{"layer", r.head.layer}, {"head", r.head.head}};
  };
  json agreement;
  const char* kinds[] = {"zero", "mean", "probe_zero", "probe_mean"};
  for (size_t k = 0; k < a.table.agreement.size(); ++k)
    agreement[kinds[k]] = agreement_json(a.table.agreement[k], label);
  return {{"source", a.source},
          {"windows", a.windows},
          {"window_starts", a.window_starts},
          {"probe", tensor_to_json(a.probe.to(torch::kFloat64), 0)},
          {"loss", rounded(a.table.loss, 6)},
          {"probe_loss", rounded(a.table.probe_loss, 6)},
          {"exact_heads", std::count_if(a.table.heads.begin(), a.table.heads.end(),
                                        [](const HeadAblation& r) { return r.exact; })},
          {"heads", rows},
          {"agreement", agreement}};
}

json priors_json(const Priors& p, const HeatmapEncoder& heatmap) {
  json doc = {{"positions", nullptr},
              {"tokens", nullptr},
              {"ov", {{"copying", head_table(p.ov_copying)}, {"top1", head_table(p.ov_top1)}}}};
  if (p.position_pattern.defined()) {
    doc["positions"] = {{"length", p.position_pattern.size(2)},
                        {"previous_token", head_table(p.position_previous_token)},
                        {"patterns", heatmap(p.position_pattern, true)}};
  }
  if (p.token_scores.defined()) doc["tokens"] = {{"scores", heatmap(p.token_scores, false)}};
  return doc;
}

json lens_json(const LensView& v, const Tokenizer& tokenizer) {
  const LogitLens& lens = v.lens;
  const torch::Tensor ids = lens.top_ids.contiguous(),
                      probs = lens.top_probs.to(torch::kFloat64).contiguous();
  const int64_t T = ids.size(1), k = ids.size(2);
  // Built by moves, each token's label once: the lab asks for this with every prompt, and
  // nlohmann's initializer lists copy whole subtrees.
  std::unordered_map<int64_t, json> labels;
  json stages = json::array();
  for (size_t s = 0; s < lens.stages.size(); ++s) {
    json positions = json::array();
    for (int64_t t = 0; t < T; ++t) {
      json top = json::array();
      for (int64_t j = 0; j < k; ++j) {
        const int64_t at = (static_cast<int64_t>(s) * T + t) * k + j;
        const int64_t id = ids.data_ptr<int64_t>()[at];
        auto label = labels.find(id);
        if (label == labels.end()) label = labels.emplace(id, tokenizer.token_label(id)).first;
        json entry(json::value_t::object);
        entry.emplace("token", label->second);
        entry.emplace("p", rounded(probs.data_ptr<double>()[at], 4));
        top.push_back(std::move(entry));
      }
      positions.push_back(std::move(top));
    }
    json stage(json::value_t::object);
    stage.emplace("name", lens.stages[s]);
    stage.emplace("top", std::move(positions));
    stages.push_back(std::move(stage));
  }
  // The prompt's own next tokens: the loss the predictions above pay (null for one token).
  const json mean_loss =
      lens.loss.numel() > 0 ? json(rounded(lens.loss.mean().item<double>(), 4)) : json(nullptr);
  json out(json::value_t::object);
  out.emplace("tokens", token_labels(tokenizer, v.ids));
  out.emplace("k", k);
  out.emplace("stages", std::move(stages));
  out.emplace("loss", tensor_to_json(lens.loss, 4));
  out.emplace("mean_loss", mean_loss);
  return out;
}

// NaN (a block without an MLP) as null.
json patching_json(const PatchingView& v, const Tokenizer& tokenizer) {
  const PatchingResult& r = v.result;
  return {
      {"position", r.position},
      {"clean_tokens", token_labels(tokenizer, v.clean)},
      {"corrupt_tokens", token_labels(tokenizer, v.corrupt)},
      {"clean_answer", tokenizer.token_label(r.clean_answer)},
      {"corrupt_answer", tokenizer.token_label(r.corrupt_answer)},
      {"clean_logit_diff", rounded(r.clean_diff, 6)},
      {"corrupt_logit_diff", rounded(r.corrupt_diff, 6)},
      {"heads", head_table(r.heads)},
      {"resid_pre", tensor_to_json(r.resid_pre, 6)},
      {"attn_out", tensor_to_json(r.attn_out, 6)},
      {"mlp_out", tensor_to_json(r.mlp_out, 6)},
      {"strongest_head", strongest(r.heads)},
      {"estimate",
       {{"heads", head_table(r.heads_estimate)},
        {"head_positions", tensor_to_json(r.head_positions_estimate, 6)},
        {"resid_pre", tensor_to_json(r.resid_pre_estimate, 6)},
        {"attn_out", tensor_to_json(r.attn_out_estimate, 6)},
        {"mlp_out", tensor_to_json(r.mlp_out_estimate, 6)},
        {"strongest_head", strongest(r.heads_estimate)}}},
      {"agreement",
       {{"heads", agreement_json(r.heads_agreement,
                                 [nh = r.heads.size(1)](int64_t i) {
                                   return json{{"layer", i / nh}, {"head", i % nh}};
                                 })},
        {"resid_pre", agreement_json(r.resid_pre_agreement, [T = r.resid_pre.size(1)](int64_t i) {
           return json{{"layer", i / T}, {"position", i % T}};
         })}}}};
}

// {from: {layer, head}, to: {layer, head}, score} of the highest entry of (L, nh, L, nh).
json strongest_pair(const torch::Tensor& t) {
  const int64_t nh = t.size(1), n = t.size(0) * nh;
  const torch::Tensor flat = t.reshape({n * n});
  const int64_t i = flat.argmax().item<int64_t>(), a = i / n, b = i % n;
  return {{"from", {{"layer", a / nh}, {"head", a % nh}}},
          {"to", {{"layer", b / nh}, {"head", b % nh}}},
          {"score", rounded(flat[i].item<double>(), 6)}};
}

json composition_json(const CompositionScores& c) {
  return {{"q", tensor_to_json(c.q, 6)},
          {"k", tensor_to_json(c.k, 6)},
          {"v", tensor_to_json(c.v, 6)},
          {"strongest",
           {{"q", strongest_pair(c.q)}, {"k", strongest_pair(c.k)}, {"v", strongest_pair(c.v)}}}};
}

json attribution_json(const AttributionView& v, const Tokenizer& tokenizer) {
  const LogitAttribution& a = v.attribution;
  return {{"tokens", token_labels(tokenizer, v.ids)},
          {"targets", token_labels(tokenizer, a.targets)},
          {"heads", tensor_to_json(a.heads, 6)},
          {"mlps", tensor_to_json(a.mlps, 6)},
          {"embed", tensor_to_json(a.embed, 6)},
          {"biases", tensor_to_json(a.biases, 6)},
          {"logits", tensor_to_json(a.logits, 6)},
          {"heads_total", head_table(a.heads.sum(0))},
          {"mlps_total", tensor_to_json(a.mlps.sum(0), 6)}};
}

json snapshots_json(const SnapshotsView& v, const Tokenizer& tokenizer,
                    const HeatmapEncoder& heatmap) {
  json scores, formed, text = json::array(), probe = json::array(), positions = json::array();
  for (const auto& [name, t] : v.scores) scores[name] = tensor_to_json(t, 4);
  for (const auto& [name, t] : v.formed) formed[name] = head_table(t);
  for (const auto& p : v.text_patterns) text.push_back(heatmap(p, true));
  for (const auto& p : v.probe_patterns) probe.push_back(heatmap(p, true));
  for (const auto& p : v.position_patterns) positions.push_back(heatmap(p, true));
  return {{"steps", v.steps},
          {"text_tokens", token_labels(tokenizer, v.text)},
          {"probe_tokens", token_labels(tokenizer, v.probe)},
          {"scores", scores},
          {"formed", formed},
          {"text_patterns", text},
          {"probe_patterns", probe},
          {"position_patterns", positions}};
}

// The k tokens with the largest weights of a unit vector over the vocabulary.
json top_tokens(const torch::Tensor& vector, const Tokenizer& tokenizer, int64_t k = 5) {
  const auto [weights, ids] = vector.topk(std::min<int64_t>(k, vector.size(0)));
  json out = json::array();
  for (int64_t i = 0; i < ids.size(0); ++i)
    out.push_back({{"token", tokenizer.token_label(ids[i].item<int64_t>())},
                   {"weight", rounded(weights[i].item<double>(), 4)}});
  return out;
}

json circuits_json(const TokenCircuits& c, const Tokenizer& tokenizer) {
  const auto directions = [&](const std::vector<std::vector<SingularDirections>>& table,
                              const char* left, const char* right) {
    json layers = json::array();
    for (const auto& layer : table) {
      json heads = json::array();
      for (const SingularDirections& d : layer) {
        json list = json::array();
        for (int64_t i = 0; i < d.values.size(0); ++i)
          list.push_back({{"value", rounded(d.values[i].item<double>(), 6)},
                          {"share", rounded(d.share[i].item<double>(), 6)},
                          {left, top_tokens(d.left[i], tokenizer)},
                          {right, top_tokens(d.right[i], tokenizer)}});
        heads.push_back(list);
      }
      layers.push_back(heads);
    }
    return layers;
  };
  return {{"ov", directions(c.ov, "reads", "writes")}, {"qk", directions(c.qk, "queries", "keys")}};
}

json geometry_json(const PositionGeometry& p, const EmbeddingGeometry& e,
                   const Tokenizer& tokenizer) {
  json neighbours = json::array();
  for (int64_t t = 0; t < e.neighbours.size(0); ++t)
    neighbours.push_back(token_labels(tokenizer, e.neighbours[t]));
  return {
      {"positions",
       {{"kind", p.kind},
        {"similarity", p.similarity.defined() ? tensor_to_json(p.similarity, 4) : json(nullptr)},
        {"shift_residual",
         p.shift_residual.defined() ? tensor_to_json(p.shift_residual, 6) : json(nullptr)},
        {"distance_bias",
         p.distance_bias.defined() ? tensor_to_json(p.distance_bias, 5) : json(nullptr)}}},
      {"tokens",
       {{"neighbours", neighbours},
        {"similarity", tensor_to_json(e.similarity, 4)},
        {"map", tensor_to_json(e.map, 4)},
        {"explained", tensor_to_json(e.explained, 4)}}}};
}

json position_loss_json(const PositionLossView& v, const ModelConfig& c) {
  return {{"source", v.source},
          {"context", v.context},
          {"block_size", c.block_size},
          {"windows", v.loss.windows},
          {"per_position", tensor_to_json(v.loss.per_position, 5)},
          {"bucket_start", tensor_to_json(v.loss.bucket_start, 0)},
          {"bucket_loss", tensor_to_json(v.loss.bucket_loss, 5)}};
}

json drift_json(const DriftView& v, const Tokenizer& tokenizer) {
  const ContextDrift& d = v.drift;
  json similarity = json::array(), baseline = json::array();
  for (size_t s = 0; s < d.stages.size(); ++s) {
    similarity.push_back(rounded(d.similarity[s], 6));
    baseline.push_back(rounded(d.baseline[s], 6));
  }
  return {{"source", v.source},
          {"token", tokenizer.token_label(d.token)},
          {"id", d.token},
          {"occurrences", d.occurrences},
          {"tokens", d.tokens},
          {"stages", d.stages},
          {"similarity", similarity},
          {"baseline", baseline}};
}

json analogy_json(const AnalogyView& v, const Tokenizer& tokenizer) {
  return {{"a", tokenizer.token_label(v.a)},
          {"b", tokenizer.token_label(v.b)},
          {"c", tokenizer.token_label(v.c)},
          {"nearest", token_labels(tokenizer, v.nearest.ids)},
          {"similarity", tensor_to_json(v.nearest.similarity, 4)}};
}

json features_json(const FeaturesView& v, const Tokenizer& tokenizer) {
  const FeatureAnalysis& a = v.analysis;
  const auto scored = [&](const std::vector<TokenScore>& scores, int decimals) {
    json out = json::array();
    for (const TokenScore& s : scores) {
      out.push_back({tokenizer.token_label(s.token), decimals == 0 ? json(static_cast<int64_t>(s.value))
                                                                : json(std::round(s.value * 1e4) / 1e4)});
    }
    return out;
  };
  // Features that fired, most frequent first; the rest are listed as silent.
  std::vector<const FeatureSummary*> order;
  json silent = json::array();
  for (const FeatureSummary& f : a.features) {
    if (f.firings > 0) order.push_back(&f); else silent.push_back(f.index);
  }
  std::stable_sort(order.begin(), order.end(), [](const FeatureSummary* x, const FeatureSummary* y) {
    return x->firings > y->firings;
  });
  const auto r4 = [](double x) { return std::round(x * 1e4) / 1e4; };
  json list = json::array();
  for (const FeatureSummary* f : order) {
    json top = json::array();
    for (const FeatureFiring& t : f->top) top.push_back({t.window, t.position, r4(t.activation)});
    json shares = json::array();
    for (const double share : f->head_shares) shares.push_back(r4(share));
    list.push_back({{"index", f->index},
                    {"firings", f->firings},
                    {"frequency", f->frequency},
                    {"mean_activation", r4(f->mean_activation)},
                    {"max_activation", r4(f->max_activation)},
                    {"histogram", f->histogram},
                    {"top", top},
                    {"fires_on", scored(f->fires_on, 0)},
                    {"head_shares", shares},
                    {"promoted", scored(f->promoted, 4)},
                    {"suppressed", scored(f->suppressed, 4)},
                    {"repeat_share", r4(f->repeat_share)},
                    {"continues_share", r4(f->continues_share)},
                    {"after_previous", f->after_previous >= 0 ? json(tokenizer.token_label(f->after_previous)) : json(nullptr)},
                    {"after_previous_share", r4(f->after_previous_share)},
                    {"label", f->label.empty() ? json(nullptr) : json(f->label)}});
  }
  json windows = json::array();
  for (int64_t w = 0; w < a.windows.size(0); ++w) windows.push_back(token_labels(tokenizer, a.windows[w]));
  return {{"sae", v.dir},
          {"hook", v.origin.hook},
          {"d_in", v.shape.d_in},
          {"width", v.shape.width},
          {"k", v.shape.k},
          {"metrics", v.metrics},
          {"source", v.source},
          {"positions", a.positions},
          {"repeat_rate", a.repeat_rate},
          {"continues_rate", a.continues_rate},
          {"histogram_bins", kHistogramBins},
          {"windows", windows},
          {"features", list},
          {"silent", silent}};
}

json training_json(const TrainingCurves& c) {
  json train = json::array(), eval = json::array();
  for (const auto& [step, loss] : c.train) train.push_back({step, loss});
  for (const auto& e : c.eval) eval.push_back({e.step, e.val_loss, e.train_loss});
  return {{"train", train}, {"eval", eval}, {"probe", c.probe}, {"phase_change", c.phase_change}};
}

}  // namespace

json tensor_to_json(const torch::Tensor& t, int decimals) {
  // One pass over a contiguous copy: element-wise item() would cost a dispatch per number.
  const torch::Tensor d = t.to(torch::kFloat64).contiguous();
  const double* data = d.data_ptr<double>();
  return nested(data, d.sizes().vec(), 0, decimals);
}

json spelled_out_heatmap(const torch::Tensor& values, bool) { return tensor_to_json(values, 4); }

json inspection_json(const Inspection& in, const LoadedRun& run, const HeatmapEncoder& heatmap) {
  json doc;
  doc["format"] = "tinylm-inspect/1";
  doc["run"] = fs::absolute(in.run_dir).lexically_normal().string();
  doc["step"] = in.step ? json(*in.step) : json(nullptr);
  doc["model"] = model_config_to_json(run.model->config());
  doc["vocab"] = token_labels(*run.tokenizer, torch::arange(run.tokenizer->vocab_size()));
  if (in.attention) {
    doc["attention"] = {{"tokens", token_labels(*run.tokenizer, in.attention->ids)},
                        {"ids", tensor_to_json(in.attention->ids, 0)},
                        {"patterns", heatmap(in.attention->patterns, true)}};
  }
  if (in.heads) doc["heads"] = heads_json(*in.heads);
  if (in.ablation) doc["ablation"] = ablation_json(*in.ablation);
  if (in.priors) doc["priors"] = priors_json(*in.priors, heatmap);
  if (in.lens) doc["logit_lens"] = lens_json(*in.lens, *run.tokenizer);
  if (in.composition) doc["composition"] = composition_json(*in.composition);
  if (in.positions && in.embeddings)
    doc["geometry"] = geometry_json(*in.positions, *in.embeddings, *run.tokenizer);
  if (in.position_loss)
    doc["position_loss"] = position_loss_json(*in.position_loss, run.model->config());
  if (in.drift) doc["context_drift"] = drift_json(*in.drift, *run.tokenizer);
  if (in.analogy) doc["analogy"] = analogy_json(*in.analogy, *run.tokenizer);
  if (in.features) doc["features"] = features_json(*in.features, *run.tokenizer);
  if (in.circuits) doc["circuits"] = circuits_json(*in.circuits, *run.tokenizer);
  if (in.attribution) doc["attribution"] = attribution_json(*in.attribution, *run.tokenizer);
  if (in.patching) doc["patching"] = patching_json(*in.patching, *run.tokenizer);
  if (in.snapshots) doc["snapshots"] = snapshots_json(*in.snapshots, *run.tokenizer, heatmap);
  if (in.training_asked)
    doc["training"] = in.training ? training_json(*in.training) : json(nullptr);
  doc["notes"] = in.notes;
  return doc;
}

}  // namespace tinylm
