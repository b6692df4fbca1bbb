#include "model/analysis/context_drift.h"

#include <stdexcept>

#include "model/activation_cache.h"

namespace tinylm {
namespace {

// The mean pairwise cosine similarity of n vectors from the sum of their unit vectors.
double mean_pairwise_cosine(const torch::Tensor& unit_sum, int64_t n) {
  const double s = unit_sum.dot(unit_sum).item<double>();
  return (s - static_cast<double>(n)) / (static_cast<double>(n) * static_cast<double>(n - 1));
}

}  // namespace

ContextDrift context_drift(GPT& model, const torch::Tensor& windows, int64_t token, int64_t batch) {
  const ModelConfig& c = model->config();
  ContextDrift out;
  out.token = token;
  out.occurrences = (windows == token).sum().item<int64_t>();
  out.tokens = windows.numel();
  if (out.occurrences < 2) {
    throw std::invalid_argument(
        "token " + std::to_string(token) + " occurs " + std::to_string(out.occurrences) + " time" +
        (out.occurrences == 1 ? "" : "s") + " in " + std::to_string(windows.numel()) +
        " tokens of text; context drift needs at least 2 occurrences");
  }
  out.stages = {"embed", "blocks.0.hook_resid_pre"};
  for (int64_t l = 0; l < c.n_layer; ++l)
    out.stages.push_back("blocks." + std::to_string(l) + ".hook_resid_post");
  const size_t S = out.stages.size();
  std::vector<torch::Tensor> token_sum, all_sum;  // per stage; each its own storage
  for (size_t s = 0; s < S; ++s) {
    token_sum.push_back(torch::zeros({c.n_embd}, torch::kFloat64));
    all_sum.push_back(torch::zeros({c.n_embd}, torch::kFloat64));
  }
  const auto keep = [&](const std::string& name) {
    return name == "hook_embed" || name == out.stages[1] ||
           name.find(".hook_resid_post") != std::string::npos;
  };
  for (int64_t start = 0; start < windows.size(0); start += batch) {
    const torch::Tensor w = windows.slice(0, start, std::min(windows.size(0), start + batch));
    const CachedRun run = run_with_cache(model, w.to(model->device()), keep);
    const torch::Tensor is_token = (w == token).flatten().to(torch::kBool);  // (b T,)
    for (size_t s = 0; s < S; ++s) {
      const torch::Tensor x =
          run.cache.at(s == 0 ? "hook_embed" : out.stages[s]).to(torch::kCPU, torch::kFloat64);
      const torch::Tensor flat = x.reshape({-1, c.n_embd});
      const torch::Tensor unit = flat / flat.norm(2, 1, true).clamp_min(1e-300);
      all_sum[s] += unit.sum(0);
      token_sum[s] += unit.index({is_token}).sum(0);
    }
  }
  for (size_t s = 0; s < S; ++s) {
    out.similarity.push_back(mean_pairwise_cosine(token_sum[s], out.occurrences));
    out.baseline.push_back(mean_pairwise_cosine(all_sum[s], windows.numel()));
  }
  return out;
}

}  // namespace tinylm
