#include "model/sae/feature_analysis.h"

#include <algorithm>
#include <map>
#include <unordered_map>

namespace tinylm {

namespace {

// Per position (N, T): whether its token occurred earlier in the window; whether the token
// after it is the one that followed the latest earlier occurrence; and that token (-1 for none).
struct Repeats {
  std::vector<uint8_t> repeat, continues;
  std::vector<int64_t> after_previous;
};

Repeats repeats_of(const torch::Tensor& windows) {
  const auto w = windows.accessor<int64_t, 2>();
  const int64_t N = windows.size(0), T = windows.size(1) - 1;
  Repeats r;
  std::vector<uint8_t>& repeat = r.repeat;
  std::vector<uint8_t>& continues = r.continues;
  repeat.resize(static_cast<size_t>(N * T));
  continues.resize(repeat.size());
  r.after_previous.assign(repeat.size(), -1);
  for (int64_t n = 0; n < N; ++n) {
    std::unordered_map<int64_t, int64_t> latest;  // token -> its latest position before t
    for (int64_t t = 0; t < T; ++t) {
      const auto it = latest.find(w[n][t]);
      if (it != latest.end()) {
        repeat[static_cast<size_t>(n * T + t)] = 1;
        continues[static_cast<size_t>(n * T + t)] = w[n][t + 1] == w[n][it->second + 1];
        r.after_previous[static_cast<size_t>(n * T + t)] = w[n][it->second + 1];
      }
      latest[w[n][t]] = t;
    }
  }
  return r;
}

// Each row's k largest (or smallest) logits and their tokens: rows (F, C) of directions in
// the stream, a slice of features at a time (GPT-2's vocabulary by 24576 features would be
// 5 GB of logits at once).
std::pair<torch::Tensor, torch::Tensor> extreme_logits(GPT& model, const torch::Tensor& rows,
                                                       int64_t k, bool largest) {
  constexpr int64_t kFeaturesPerSlice = 256;
  std::vector<torch::Tensor> values, tokens;
  const torch::Tensor& W_U = model->unembedding();
  k = std::min(k, W_U.size(0));
  for (int64_t first = 0; first < rows.size(0); first += kFeaturesPerSlice) {
    const torch::Tensor slice = rows.slice(0, first, first + kFeaturesPerSlice);
    const torch::Tensor logits = torch::matmul(slice * model->transformer->ln_f->weight, W_U.t());
    auto [v, i] = logits.topk(k, -1, largest);
    values.push_back(v);
    tokens.push_back(i);
  }
  return {torch::cat(values).contiguous(), torch::cat(tokens).contiguous()};
}

std::vector<TokenScore> scores_of(const std::pair<torch::Tensor, torch::Tensor>& top, int64_t row) {
  std::vector<TokenScore> out;
  const auto v = top.first.accessor<float, 2>();
  const auto t = top.second.accessor<int64_t, 2>();
  for (int64_t j = 0; j < top.first.size(1); ++j) out.push_back({t[row][j], v[row][j]});
  return out;
}

}  // namespace

torch::Tensor residual_direction(GPT& model, const HookRows& hook, const torch::Tensor& rows) {
  if (hook.is("attn.hook_z")) {  // z -> c_proj: the heads' sum, as the block adds it
    const torch::Tensor& W_O = model->transformer->h[static_cast<size_t>(hook.layer())]->attn->c_proj->weight;
    return torch::matmul(rows, W_O.t());
  }
  for (const char* stream : {"hook_resid_pre", "hook_resid_mid", "hook_resid_post", "hook_attn_out",
                             "hook_mlp_out", "hook_embed"}) {
    if (hook.is(stream)) return rows;
  }
  return {};
}

FeatureAnalysis analyse_features(GPT& model, const HookRows& hook, const SparseAutoencoder& sae,
                                 const torch::Tensor& windows, int64_t top_firings,
                                 int64_t top_tokens) {
  const torch::NoGradGuard no_grad;
  FeatureAnalysis out;
  out.windows = windows.to(torch::kCPU).contiguous();
  const int64_t N = windows.size(0), T = windows.size(1) - 1, F = sae.shape.width;
  out.positions = N * T;

  // Every firing as (feature, position, activation), from the sparse codes of the rows.
  std::vector<torch::Tensor> values, indices;
  constexpr int64_t kWindowsPerPass = 16;
  for (int64_t first = 0; first < N; first += kWindowsPerPass) {
    const torch::Tensor x = hook.collect(out.windows.slice(0, first, first + kWindowsPerPass).slice(1, 0, T));
    const auto code = sae.encode_sparse(x);
    values.push_back(code.values);
    indices.push_back(code.indices);
  }
  const torch::Tensor value = torch::cat(values).flatten(), feature = torch::cat(indices).flatten();
  const torch::Tensor position = torch::arange(out.positions).repeat_interleave(sae.shape.k);
  const torch::Tensor fired = value > 0;
  torch::Tensor v = value.masked_select(fired), f = feature.masked_select(fired),
                p = position.masked_select(fired);
  // Strongest first within each feature: by activation, then (stably) by feature.
  const torch::Tensor by_value = v.argsort(0, /*descending=*/true);
  v = v.index_select(0, by_value), f = f.index_select(0, by_value), p = p.index_select(0, by_value);
  const torch::Tensor by_feature = std::get<1>(f.sort(/*stable=*/true, 0, false));
  v = v.index_select(0, by_feature).contiguous();
  f = f.index_select(0, by_feature).contiguous();
  p = p.index_select(0, by_feature).contiguous();

  const Repeats r = repeats_of(out.windows);
  const std::vector<uint8_t>& repeat = r.repeat;
  const std::vector<uint8_t>& continues = r.continues;
  {
    const int64_t V = model->config().vocab_size;
    out.after_previous_rate.assign(static_cast<size_t>(V), 0.0);
    for (const int64_t a : r.after_previous) {
      if (a >= 0 && a < V) out.after_previous_rate[static_cast<size_t>(a)] += 1.0 / static_cast<double>(out.positions);
    }
  }
  const int64_t repeats = std::count(repeat.begin(), repeat.end(), 1);
  const int64_t continuing = std::count(continues.begin(), continues.end(), 1);
  out.repeat_rate = static_cast<double>(repeats) / static_cast<double>(out.positions);
  out.continues_rate = static_cast<double>(continuing) / static_cast<double>(out.positions);

  // What each decoder direction writes, all features at once.
  const torch::Tensor W_dec = sae.W_dec.detach();
  torch::Tensor head_shares;
  if (hook.per_head()) {
    const torch::Tensor per_head = W_dec.reshape({F, hook.heads(), -1}).square().sum(-1);
    head_shares = (per_head / per_head.sum(-1, true).clamp_min(1e-30)).contiguous();
  }
  std::pair<torch::Tensor, torch::Tensor> promoted, suppressed;  // (F, top_tokens) each
  if (const torch::Tensor direction = residual_direction(model, hook, W_dec); direction.defined()) {
    promoted = extreme_logits(model, direction, top_tokens, true);
    suppressed = extreme_logits(model, direction, top_tokens, false);
  }

  const auto va = v.accessor<float, 1>();
  const auto fa = f.accessor<int64_t, 1>();
  const auto pa = p.accessor<int64_t, 1>();
  const auto tokens = out.windows.accessor<int64_t, 2>();
  out.features.resize(static_cast<size_t>(F));
  int64_t i = 0;
  const int64_t n = v.size(0);
  for (int64_t j = 0; j < F; ++j) {
    FeatureSummary& s = out.features[static_cast<size_t>(j)];
    s.index = j;
    s.histogram.assign(kHistogramBins, 0);
    const int64_t begin = i;
    while (i < n && fa[i] == j) ++i;
    s.firings = i - begin;
    s.frequency = static_cast<double>(s.firings) / static_cast<double>(out.positions);
    if (head_shares.defined()) {
      const torch::Tensor shares = head_shares[j];
      s.head_shares.assign(shares.data_ptr<float>(), shares.data_ptr<float>() + shares.numel());
    }
    if (promoted.first.defined()) {
      s.promoted = scores_of(promoted, j);
      s.suppressed = scores_of(suppressed, j);
    }
    if (s.firings == 0) continue;
    s.max_activation = va[begin];
    double sum = 0.0, on_repeat = 0.0, on_continue = 0.0;
    std::map<int64_t, int64_t> counts;
    std::map<int64_t, double> after;  // token after the previous occurrence -> activation
    for (int64_t e = begin; e < i; ++e) {
      const double a = va[e];
      const int64_t pos = pa[e], w = pos / T, t = pos % T;
      sum += a;
      on_repeat += repeat[static_cast<size_t>(pos)] ? a : 0.0;
      on_continue += continues[static_cast<size_t>(pos)] ? a : 0.0;
      ++counts[tokens[w][t]];
      if (const int64_t a_prev = r.after_previous[static_cast<size_t>(pos)]; a_prev >= 0) after[a_prev] += a;
      if (e - begin < top_firings) s.top.push_back({w, t, a});
      const auto bin = std::min<int64_t>(kHistogramBins - 1,
                                         static_cast<int64_t>(a / s.max_activation * kHistogramBins));
      ++s.histogram[static_cast<size_t>(bin)];
    }
    s.mean_activation = sum / static_cast<double>(s.firings);
    s.repeat_share = on_repeat / sum;
    s.continues_share = on_continue / sum;
    std::vector<TokenScore> on;
    for (const auto& [token, count] : counts) on.push_back({token, static_cast<double>(count)});
    std::stable_sort(on.begin(), on.end(), [](const TokenScore& a, const TokenScore& b) { return a.value > b.value; });
    if (static_cast<int64_t>(on.size()) > top_tokens) on.resize(static_cast<size_t>(top_tokens));
    s.fires_on = std::move(on);
    for (const auto& [token, mass] : after) {
      if (mass / sum > s.after_previous_share) {
        s.after_previous = token;
        s.after_previous_share = mass / sum;
      }
    }
    const bool promotes_it = s.promoted.empty() || s.promoted.front().token == s.after_previous;
    if (s.firings >= kInductionFirings && s.after_previous_share >= kInductionShare && promotes_it &&
        s.after_previous_share >= kInductionLift * out.after_previous_rate[static_cast<size_t>(s.after_previous)])
      s.label = "induction";
  }
  return out;
}

}  // namespace tinylm
