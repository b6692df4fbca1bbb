#include "tools/inspect/inspection_tables.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

namespace tinylm {
namespace {

// A number in a fixed-width cell; NaN (a score no row has) as "-".
std::string table_cell(double v, const char* format = "%7.3f") {
  char text[32];
  std::snprintf(text, sizeof text, format, std::isnan(v) ? 0.0 : v);
  if (!std::isnan(v)) return text;
  return std::string(std::max<size_t>(1, std::strlen(text)) - 1, ' ') + "-";  // as wide
}

double at(const torch::Tensor& table, int64_t l, int64_t h) { return table[l][h].item<double>(); }

std::string label(const LoadedRun& run, int64_t id) {
  return visible_token(run.tokenizer->token_label(id));
}

void print_attention(const AttentionView& a, const LoadedRun& run) {
  std::printf("attention patterns of %lld tokens:", static_cast<long long>(a.ids.numel()));
  for (int64_t i = 0; i < a.ids.numel(); ++i)
    std::printf(" %s", label(run, a.ids[i].item<int64_t>()).c_str());
  std::printf("\n  (every head's T x T pattern is in --json and --html)\n\n");
}

// "L.H (score)" of the highest entry of an (L, nh) table.
std::string strongest_head(const torch::Tensor& table) {
  const torch::Tensor flat = torch::nan_to_num(table.to(torch::kFloat64), -1.0).flatten();
  const int64_t i = flat.argmax().item<int64_t>(), nh = table.size(1);
  return std::to_string(i / nh) + "." + std::to_string(i % nh) + " (" +
         table_cell(flat[i].item<double>(), "%.3f") + ")";
}

void print_heads(const HeadsView& h) {
  const auto& s = h.scores.values;
  const auto& p = h.probe.scores.values;
  std::printf(
      "head scores on %lld windows of %lld tokens from %s, and on the induction probe "
      "(%lld sequences of %lld random tokens repeated twice)\n",
      static_cast<long long>(h.scores.sequences), static_cast<long long>(h.scores.length),
      h.source.c_str(), static_cast<long long>(h.probe_sequences),
      static_cast<long long>(h.probe_length / 2));
  std::printf(
      "head   prev-tok    self   first     dup  induct entropy | probe: prev-tok  induct\n");
  const torch::Tensor& prev = s.at("previous_token");
  for (int64_t l = 0; l < prev.size(0); ++l) {
    for (int64_t k = 0; k < prev.size(1); ++k) {
      std::printf("%lld.%-3lld %s %s %s %s %s %s |        %s %s\n", static_cast<long long>(l),
                  static_cast<long long>(k), table_cell(at(prev, l, k), "%9.3f").c_str(),
                  table_cell(at(s.at("self"), l, k)).c_str(),
                  table_cell(at(s.at("first_token"), l, k)).c_str(),
                  table_cell(at(s.at("duplicate_token"), l, k)).c_str(),
                  table_cell(at(s.at("induction"), l, k)).c_str(),
                  table_cell(at(s.at("entropy"), l, k)).c_str(),
                  table_cell(at(p.at("previous_token"), l, k), "%9.3f").c_str(),
                  table_cell(at(p.at("induction"), l, k)).c_str());
    }
  }
  std::printf("strongest previous-token head: %s; strongest induction head on the probe: %s\n",
              strongest_head(prev).c_str(), strongest_head(p.at("induction")).c_str());
  std::printf("probe loss: %.3f nats on the first half, %.3f on the repeat\n\n",
              h.probe.losses.first_half, h.probe.losses.second_half);
}

void print_ablation(const AblationView& a) {
  std::printf("ablation on %lld windows from %s: loss %.4f, probe loss on the repeat %.4f\n",
              static_cast<long long>(a.windows), a.source.c_str(), a.table.loss,
              a.table.probe_loss);
  std::printf(
      "head   d_loss zero  d_loss mean | d_probe zero  d_probe mean   (exact, sorted by d_loss "
      "zero; ~ estimated by attribution; --exact K runs more)\n");
  for (const HeadAblation& r : a.table.heads) {
    const AblationEstimate& e = r.estimate;
    std::printf("%lld.%-3lld %s %s |  %s  %s%s\n", static_cast<long long>(r.head.layer),
                static_cast<long long>(r.head.head),
                table_cell(r.exact ? r.zero : e.zero, "%+11.4f").c_str(),
                table_cell(r.exact ? r.mean : e.mean, "%+12.4f").c_str(),
                table_cell(r.exact ? r.probe_zero : e.probe_zero, "%+11.4f").c_str(),
                table_cell(r.exact ? r.probe_mean : e.probe_mean, "%+12.4f").c_str(),
                r.exact ? "" : "  ~");
  }
  if (!a.table.agreement.empty() && a.table.agreement[0].k > 0) {
    std::printf(
        "attribution against exact on the exact heads: Spearman %.3f (zero), %.3f (probe "
        "zero)\n",
        a.table.agreement[0].spearman, a.table.agreement[2].spearman);
  }
  std::printf("\n");
}

void print_priors(const Priors& p) {
  std::printf("priors from the weights alone (docs/INSPECT.md: Priors)\n");
  std::printf("head   position prev-tok   OV copying   OV top-1\n");
  for (int64_t l = 0; l < p.ov_copying.size(0); ++l) {
    for (int64_t k = 0; k < p.ov_copying.size(1); ++k) {
      const double pos =
          p.position_previous_token.defined() ? at(p.position_previous_token, l, k) : std::nan("");
      std::printf("%lld.%-3lld %s %s %s\n", static_cast<long long>(l), static_cast<long long>(k),
                  table_cell(pos, "%17.3f").c_str(),
                  table_cell(at(p.ov_copying, l, k), "%12.3f").c_str(),
                  table_cell(at(p.ov_top1, l, k), "%10.3f").c_str());
    }
  }
  std::printf("\n");
}

void print_logit_lens(const LensView& v, const LoadedRun& run) {
  const LogitLens& lens = v.lens;
  const int64_t last = v.ids.numel() - 1;
  std::printf("logit lens at the last position (after \"%s\"): top predictions per stage\n",
              label(run, v.ids[last].item<int64_t>()).c_str());
  for (size_t s = 0; s < lens.stages.size(); ++s) {
    std::printf("  %-9s", lens.stages[s].c_str());
    for (int64_t j = 0; j < lens.top_ids.size(2); ++j) {
      std::printf("  %s %.3f", label(run, lens.top_ids[s][last][j].item<int64_t>()).c_str(),
                  lens.top_probs[s][last][j].item<double>());
    }
    std::printf("\n");
  }
  std::printf("top-1 per position (rows: stages; columns: positions)\n  %-9s", "input");
  for (int64_t i = 0; i <= last; ++i)
    std::printf(" %s", label(run, v.ids[i].item<int64_t>()).c_str());
  std::printf("\n");
  for (size_t s = 0; s < lens.stages.size(); ++s) {
    std::printf("  %-9s", lens.stages[s].c_str());
    for (int64_t t = 0; t <= last; ++t)
      std::printf(" %s", label(run, lens.top_ids[s][t][0].item<int64_t>()).c_str());
    std::printf("\n");
  }
  std::printf("\n");
}

void print_composition(const CompositionScores& c) {
  std::printf("composition scores, the strongest pairs (docs/INSPECT.md: Composition)\n");
  const int64_t nh = c.q.size(1), n = c.q.size(0) * nh;
  for (const auto& [name, t] : {std::pair{"Q", &c.q}, std::pair{"K", &c.k}, std::pair{"V", &c.v}}) {
    const auto top = t->reshape({n * n}).topk(std::min<int64_t>(5, n * n));
    std::printf("  %s:", name);
    for (int64_t j = 0; j < std::get<0>(top).size(0); ++j) {
      const int64_t i = std::get<1>(top)[j].item<int64_t>(), a = i / n, b = i % n;
      if (std::get<0>(top)[j].item<double>() <= 0) break;  // a one-layer model has no pairs
      std::printf("  %lld.%lld->%lld.%lld %.3f", static_cast<long long>(a / nh),
                  static_cast<long long>(a % nh), static_cast<long long>(b / nh),
                  static_cast<long long>(b % nh), std::get<0>(top)[j].item<double>());
    }
    std::printf("\n");
  }
  std::printf("\n");
}

// The five tokens a unit vector over the vocabulary weighs most.
std::string top_labels(const torch::Tensor& vector, const LoadedRun& run) {
  const auto ids = std::get<1>(vector.topk(std::min<int64_t>(5, vector.size(0))));
  std::string out;
  for (int64_t i = 0; i < ids.size(0); ++i)
    out += (i ? " " : "") + label(run, ids[i].item<int64_t>());
  return out;
}

void print_circuits(const TokenCircuits& c, const LoadedRun& run) {
  std::printf(
      "token circuits: each head's top singular direction (its share of the circuit's squared "
      "norm)\nhead    OV reads -> writes                        | QK queries -> keys\n");
  for (size_t l = 0; l < c.ov.size(); ++l) {
    for (size_t h = 0; h < c.ov[l].size(); ++h) {
      const SingularDirections &ov = c.ov[l][h], &qk = c.qk[l][h];
      std::printf("%zu.%-3zu (%3.0f%%) %s -> %s | (%3.0f%%) %s -> %s\n", l, h,
                  100 * ov.share[0].item<double>(), top_labels(ov.left[0], run).c_str(),
                  top_labels(ov.right[0], run).c_str(), 100 * qk.share[0].item<double>(),
                  top_labels(qk.left[0], run).c_str(), top_labels(qk.right[0], run).c_str());
    }
  }
  std::printf("\n");
}

void print_geometry(const PositionGeometry& p, const EmbeddingGeometry& e, const LoadedRun& run) {
  std::printf("position geometry (%s positions)", p.kind.c_str());
  if (p.shift_residual.defined()) {
    std::printf(
        ": PE(pos + k) from PE(pos) by the best linear map, residual on held-out positions\n ");
    for (int64_t k = 0; k < p.shift_residual.size(0); ++k)
      std::printf(" k=%lld %s", static_cast<long long>(k + 1),
                  table_cell(p.shift_residual[k].item<double>(), "%.4f").c_str());
  } else if (p.similarity.defined()) {
    std::printf(": the rotation's kernel between positions is in --json and --html");
  } else if (p.distance_bias.defined()) {
    std::printf(": each head's score bias at distance d (layer 0; every layer in --json)\n");
    const torch::Tensor b = p.distance_bias[0];  // (nh, P)
    const int64_t P = b.size(1);
    std::vector<int64_t> columns;
    for (int64_t d = 0; d < P; d = d == 0 ? 1 : 2 * d) columns.push_back(d);
    if (columns.back() != P - 1) columns.push_back(P - 1);
    std::printf("  head");
    for (const int64_t d : columns) std::printf(" %7s", ("d=" + std::to_string(d)).c_str());
    for (int64_t h = 0; h < b.size(0); ++h) {
      std::printf("\n  %4lld", static_cast<long long>(h));
      for (const int64_t d : columns) std::printf(" %7.3f", b[h][d].item<double>());
    }
  }
  std::printf(
      "\ntoken embeddings: nearest neighbours by cosine similarity; PCA holds %.0f%% + "
      "%.0f%% of the variance in two components\n",
      100 * e.explained[0].item<double>(), 100 * e.explained[1].item<double>());
  for (int64_t t = 0; t < e.neighbours.size(0); ++t) {
    std::printf("  %s:", label(run, t).c_str());
    for (int64_t j = 0; j < std::min<int64_t>(3, e.neighbours.size(1)); ++j)
      std::printf(" %s %.2f", label(run, e.neighbours[t][j].item<int64_t>()).c_str(),
                  e.similarity[t][j].item<double>());
    std::printf(t % 4 == 3 ? "\n" : "   ");
  }
  std::printf("\n\n");
}

void print_position_loss(const PositionLossView& v, int64_t block_size) {
  const PositionLoss& p = v.loss;
  std::printf(
      "loss by position: mean nats at each position of %lld windows of %lld tokens from %s "
      "(trained at %lld)\n",
      static_cast<long long>(p.windows), static_cast<long long>(v.context), v.source.c_str(),
      static_cast<long long>(block_size));
  const int64_t K = p.bucket_start.size(0), N = p.per_position.size(0);
  for (int64_t k = 0; k < K; ++k) {
    const int64_t from = p.bucket_start[k].item<int64_t>();
    const int64_t to = k + 1 < K ? p.bucket_start[k + 1].item<int64_t>() : N;
    std::printf("  %5lld-%-5lld %.4f%s\n", static_cast<long long>(from),
                static_cast<long long>(to - 1), p.bucket_loss[k].item<double>(),
                from <= block_size && block_size < to ? "  <- block_size" : "");
  }
  std::printf("\n");
}

void print_drift(const DriftView& v, const LoadedRun& run) {
  const ContextDrift& d = v.drift;
  std::printf(
      "context drift of %s: the mean cosine similarity of its %lld occurrences' vectors in %s "
      "(baseline: any two positions)\n",
      label(run, d.token).c_str(), static_cast<long long>(d.occurrences), v.source.c_str());
  for (size_t s = 0; s < d.stages.size(); ++s)
    std::printf("  %-26s %.4f   baseline %.4f\n", d.stages[s].c_str(), d.similarity[s],
                d.baseline[s]);
  std::printf("\n");
}

void print_analogy(const AnalogyView& v, const LoadedRun& run) {
  std::printf("%s is to %s as %s is to:", label(run, v.a).c_str(), label(run, v.b).c_str(),
              label(run, v.c).c_str());
  for (int64_t i = 0; i < v.nearest.ids.size(0); ++i)
    std::printf(" %s %.3f", label(run, v.nearest.ids[i].item<int64_t>()).c_str(),
                v.nearest.similarity[i].item<double>());
  std::printf("\n\n");
}

void print_features(const FeaturesView& v, const LoadedRun& run) {
  const FeatureAnalysis& a = v.analysis;
  std::printf("SAE %s on %s: %lld features, k %lld", v.dir.c_str(), v.origin.hook.c_str(),
              static_cast<long long>(v.shape.width), static_cast<long long>(v.shape.k));
  if (!v.metrics.is_null() && v.metrics.contains("explained_variance")) {
    const auto num = [&](const char* key) {
      return v.metrics[key].is_number() ? v.metrics[key].get<double>() : std::nan("");
    };
    std::printf("; explained variance %.4f, L0 %.2f, dead %.4f, CE loss recovered %.4f",
                num("explained_variance"), num("l0"), num("dead_fraction"), num("ce_loss_recovered"));
  }
  std::vector<const FeatureSummary*> order;
  for (const FeatureSummary& f : a.features) order.push_back(&f);
  std::stable_sort(order.begin(), order.end(), [](const FeatureSummary* x, const FeatureSummary* y) {
    return x->firings > y->firings;
  });
  const int64_t silent = std::count_if(order.begin(), order.end(), [](const FeatureSummary* f) { return f->firings == 0; });
  const int64_t induction = std::count_if(order.begin(), order.end(), [](const FeatureSummary* f) { return f->label == "induction"; });
  std::printf("\non %lld tokens of %s: %lld features never fired, %lld are induction-like; the 20 most frequent:\n",
              static_cast<long long>(a.positions), v.source.c_str(), static_cast<long long>(silent),
              static_cast<long long>(induction));
  std::printf("%8s %9s %8s  %-24s %-22s %s\n", "feature", "frequency", "max", "fires on", "promotes", "");
  for (size_t i = 0; i < std::min<size_t>(20, order.size()) && order[i]->firings > 0; ++i) {
    const FeatureSummary& f = *order[i];
    std::string on, promotes;
    for (const TokenScore& t : f.fires_on) on += (on.empty() ? "" : " ") + label(run, t.token);
    for (size_t j = 0; j < std::min<size_t>(3, f.promoted.size()); ++j)
      promotes += (promotes.empty() ? "" : " ") + label(run, f.promoted[j].token);
    const std::string named = f.label == "induction" ? "induction: after the previous occurrence comes " +
                                                            label(run, f.after_previous)
                                                      : f.label;
    std::printf("%8lld %9.4f %8.3f  %-24s %-22s %s\n", static_cast<long long>(f.index), f.frequency,
                f.max_activation, on.c_str(), promotes.c_str(), named.c_str());
  }
  std::printf("\n");
}

void print_attribution(const AttributionView& v) {
  const LogitAttribution& a = v.attribution;
  const torch::Tensor heads = a.heads.sum(0), mlps = a.mlps.sum(0);
  std::printf(
      "direct logit attribution, summed over the %lld positions of the prompt: each part's "
      "direct share of the next token's logit (total %.3f; embedding %.3f, biases %.3f)\n",
      static_cast<long long>(a.targets.numel()), a.logits.sum().item<double>(),
      a.embed.sum().item<double>(), a.biases.sum().item<double>());
  std::printf("layer     mlp | heads:");
  for (int64_t h = 0; h < heads.size(1); ++h) std::printf(" %7lld", static_cast<long long>(h));
  std::printf("\n");
  for (int64_t l = 0; l < heads.size(0); ++l) {
    std::printf("%5lld %s |       ", static_cast<long long>(l),
                table_cell(mlps[l].item<double>()).c_str());
    for (int64_t h = 0; h < heads.size(1); ++h)
      std::printf(" %s", table_cell(at(heads, l, h)).c_str());
    std::printf("\n");
  }
  std::printf("  (per position in --json and --html)\n\n");
}

void print_patching(const PatchingView& v, const LoadedRun& run) {
  const PatchingResult& r = v.result;
  std::printf(
      "activation patching after token %lld (\"%s\" clean, \"%s\" corrupted): answers "
      "\"%s\" (clean) and \"%s\" (corrupted), logit difference %.3f clean, %.3f corrupted\n",
      static_cast<long long>(r.position), label(run, v.clean[r.position].item<int64_t>()).c_str(),
      label(run, v.corrupt[r.position].item<int64_t>()).c_str(), label(run, r.clean_answer).c_str(),
      label(run, r.corrupt_answer).c_str(), r.clean_diff, r.corrupt_diff);
  std::printf(
      "fraction restored (0: the corrupted run, 1: the clean one)\nlayer attn_out mlp_out | heads' "
      "z:");
  for (int64_t h = 0; h < r.heads.size(1); ++h) std::printf(" %7lld", static_cast<long long>(h));
  std::printf("\n");
  for (int64_t l = 0; l < r.heads.size(0); ++l) {
    std::printf("%5lld %s %s |         ", static_cast<long long>(l),
                table_cell(r.attn_out[l].item<double>(), "%8.3f").c_str(),
                table_cell(r.mlp_out[l].item<double>()).c_str());
    for (int64_t h = 0; h < r.heads.size(1); ++h)
      std::printf(" %s", table_cell(at(r.heads, l, h)).c_str());
    std::printf("\n");
  }
  std::printf(
      "strongest head: %s; by attribution patching: %s (Spearman %.3f over the heads, top %lld "
      "shared: %zu)\nresid_pre by position (rows: layers)\n      ",
      strongest_head(r.heads).c_str(), strongest_head(r.heads_estimate).c_str(),
      r.heads_agreement.spearman, static_cast<long long>(r.heads_agreement.k),
      r.heads_agreement.both.size());
  for (int64_t t = 0; t < r.resid_pre.size(1); ++t)
    std::printf(" %6s", label(run, v.corrupt[t].item<int64_t>()).c_str());
  std::printf("\n");
  for (int64_t l = 0; l < r.resid_pre.size(0); ++l) {
    std::printf("%5lld ", static_cast<long long>(l));
    for (int64_t t = 0; t < r.resid_pre.size(1); ++t)
      std::printf(" %s", table_cell(at(r.resid_pre, l, t), "%6.2f").c_str());
    std::printf("\n");
  }
  std::printf("\n");
}

void print_snapshots(const SnapshotsView& v) {
  std::printf(
      "snapshots of the heads at %zu steps, %lld to %lld: when each formed (its score first "
      "crossed half its last)\n",
      v.steps.size(), static_cast<long long>(v.steps.front()),
      static_cast<long long>(v.steps.back()));
  std::printf("head   prev-tok formed  induct formed | last: prev-tok  induct  distance\n");
  const torch::Tensor &prev = v.formed.at("previous_token"), &ind = v.formed.at("induction");
  const int64_t S = static_cast<int64_t>(v.steps.size());
  for (int64_t l = 0; l < prev.size(0); ++l) {
    for (int64_t h = 0; h < prev.size(1); ++h) {
      std::printf(
          "%lld.%-3lld %s %s |      %s %s %s\n", static_cast<long long>(l),
          static_cast<long long>(h), table_cell(at(prev, l, h), "%15.0f").c_str(),
          table_cell(at(ind, l, h), "%14.0f").c_str(),
          table_cell(v.scores.at("previous_token")[S - 1][l][h].item<double>(), "%9.3f").c_str(),
          table_cell(v.scores.at("induction")[S - 1][l][h].item<double>()).c_str(),
          table_cell(v.scores.at("mean_distance")[S - 1][l][h].item<double>(), "%9.2f").c_str());
    }
  }
  std::printf("\n");
}

}  // namespace

void print_inspection(const Inspection& in, const LoadedRun& run) {
  if (in.attention) print_attention(*in.attention, run);
  if (in.heads) print_heads(*in.heads);
  if (in.ablation) print_ablation(*in.ablation);
  if (in.priors) print_priors(*in.priors);
  if (in.lens) print_logit_lens(*in.lens, run);
  if (in.composition) print_composition(*in.composition);
  if (in.positions && in.embeddings) print_geometry(*in.positions, *in.embeddings, run);
  if (in.position_loss) print_position_loss(*in.position_loss, run.model->config().block_size);
  if (in.drift) print_drift(*in.drift, run);
  if (in.analogy) print_analogy(*in.analogy, run);
  if (in.features) print_features(*in.features, run);
  if (in.circuits) print_circuits(*in.circuits, run);
  if (in.attribution) print_attribution(*in.attribution);
  if (in.patching) print_patching(*in.patching, run);
  if (in.snapshots) print_snapshots(*in.snapshots);
  std::fflush(stdout);
}

}  // namespace tinylm
