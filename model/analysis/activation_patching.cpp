#include "model/analysis/activation_patching.h"

#include <algorithm>
#include <limits>
#include <map>
#include <stdexcept>
#include <vector>

#include "model/activation_cache.h"
#include "model/analysis/stream_gradients.h"
#include "model/scoped_mode.h"

namespace tinylm {
namespace {

// One patched run: the clean activation of `hook` written into the corrupted run's, for one
// head (or all) at one position (or all). Its score goes to *out.
struct Site {
  std::string hook;
  int64_t head = -1, position = -1;
  double* out = nullptr;
};

// LD = logit[a] - logit[b] at position P of each row: logits (B, T, V) -> (B,) float64.
torch::Tensor logit_diff(const torch::Tensor& logits, int64_t P, int64_t a, int64_t b) {
  const torch::Tensor row = logits.select(1, P).to(torch::kFloat64);  // (B, V)
  return row.select(1, a) - row.select(1, b);
}

// A hook that writes, into row r of the batch, the clean activation of each site given for r.
HookFn patch_rows(const torch::Tensor& clean, std::vector<std::pair<int64_t, const Site*>> rows) {
  return [clean, rows](const torch::Tensor& x, const std::string&) {
    torch::Tensor out = x.clone();
    for (const auto& [r, site] : rows) {
      torch::Tensor into = out[r], from = clean;  // (nh, T, hs) for z, (T, C) for the residual
      if (site->head >= 0) into = into.select(0, site->head), from = from.select(0, site->head);
      if (site->position >= 0) {
        into = into.select(into.dim() - 2, site->position);
        from = from.select(from.dim() - 2, site->position);
      }
      into.copy_(from);
    }
    return out;
  };
}

}  // namespace

PatchingResult activation_patching(GPT& model, const torch::Tensor& clean,
                                   const torch::Tensor& corrupt, int64_t position,
                                   int64_t batch_size, const TokenLabel& label,
                                   ExactPatching exact) {
  const ModelConfig& mc = model->config();
  if (clean.dim() != 1 || corrupt.dim() != 1 || clean.size(0) != corrupt.size(0)) {
    throw std::invalid_argument("patching needs texts of the same length: the clean text is " +
                                std::to_string(clean.numel()) + " tokens, the corrupted " +
                                std::to_string(corrupt.numel()));
  }
  if (clean.size(0) == 0 || clean.size(0) > mc.block_size) {
    throw std::invalid_argument("patching needs 1 to block_size (" + std::to_string(mc.block_size) +
                                ") tokens; the texts are " + std::to_string(clean.size(0)));
  }
  if (position < 0 || position >= clean.size(0)) {
    throw std::invalid_argument("position " + std::to_string(position) +
                                " is outside the texts' tokens 0-" +
                                std::to_string(clean.size(0) - 1));
  }
  const int64_t L = mc.n_layer, nh = mc.n_head, P = position;
  const int64_t T = P + 1;  // tokens after P cannot change the logits at P: they are left out
  const torch::Tensor clean_in = clean.slice(0, 0, T).to(torch::kInt64).unsqueeze(0);
  const torch::Tensor corrupt_in = corrupt.slice(0, 0, T).to(torch::kInt64).unsqueeze(0);
  const ScopedMode eval = eval_mode(*model);
  torch::NoGradGuard no_grad;

  std::vector<HookFilter> sites_of;
  for (const char* suffix : {"attn.hook_z", "hook_resid_pre", "hook_attn_out", "hook_mlp_out"})
    sites_of.push_back(names_ending_with(suffix));
  const CachedRun clean_run = run_with_cache(model, clean_in, [&](const std::string& name) {
    return std::any_of(sites_of.begin(), sites_of.end(), [&](const auto& f) { return f(name); });
  });
  PatchingResult r;
  r.position = P;
  r.clean_answer = clean_run.logits[0][P].argmax().item<int64_t>();
  // The corrupted run, once, with gradients: its answer, its residual stream (the exact
  // runs' prefixes) and the attribution's gradients of LD at P.
  const StreamGradients corrupted = stream_gradients(
      model, corrupt_in,
      [&](const torch::Tensor& normalized) {
        const torch::Tensor logits = model->unembed(normalized.select(1, P));  // (1, V)
        r.corrupt_answer = logits[0].argmax().item<int64_t>();
        if (r.clean_answer == r.corrupt_answer) {
          throw std::invalid_argument(
              "the clean and the corrupted text both predict " + label(r.clean_answer) +
              " after position " + std::to_string(P) +
              ": there is no logit difference to restore; corrupt the text so that its "
              "prediction changes");
        }
        return (logits[0][r.clean_answer] - logits[0][r.corrupt_answer]).to(torch::kFloat64);
      },
      /*head_outputs=*/true);
  r.clean_diff = logit_diff(clean_run.logits, P, r.clean_answer, r.corrupt_answer).item<double>();
  r.corrupt_diff = corrupted.objective;
  const double span = r.clean_diff - r.corrupt_diff;

  const auto f64 = torch::TensorOptions().dtype(torch::kFloat64);
  r.heads = torch::zeros({L, nh}, f64);
  // Before the first token that differs, the clean and corrupted residuals are the same (the
  // model is causal): patching there restores nothing, exactly, and is not run.
  r.resid_pre = torch::zeros({L, T}, f64);
  r.attn_out = torch::zeros({L}, f64);
  r.mlp_out = torch::full({L}, std::numeric_limits<double>::quiet_NaN(), f64);
  const torch::Tensor differs = (clean_in[0] != corrupt_in[0]).nonzero();
  const int64_t first_difference = differs.numel() > 0 ? differs[0][0].item<int64_t>() : T;

  // Attribution: (clean - corrupt) . gradient, per position, over span.
  const auto per_position = [&](const torch::Tensor& clean_value, const torch::Tensor& value,
                                const torch::Tensor& grad) {  // (1, T, C) -> (T,)
    return ((clean_value - value).to(torch::kFloat64) * grad.to(torch::kFloat64)).sum(-1)[0] / span;
  };
  r.resid_pre_estimate = torch::zeros({L, T}, f64);
  r.attn_out_estimate = torch::zeros({L}, f64);
  r.mlp_out_estimate = torch::full({L}, std::numeric_limits<double>::quiet_NaN(), f64);
  r.head_positions_estimate = torch::zeros({L, nh, T}, f64);
  for (int64_t l = 0; l < L; ++l) {
    const auto i = static_cast<size_t>(l);
    r.resid_pre_estimate[l] =
        per_position(clean_run.cache.at(hook_name(l, "hook_resid_pre")),
                     corrupted.resid_pre.value[i], corrupted.resid_pre.grad[i]);
    r.attn_out_estimate[l] = per_position(clean_run.cache.at(hook_name(l, "hook_attn_out")),
                                          corrupted.attn_out.value[i], corrupted.attn_out.grad[i])
                                 .sum();
    if (corrupted.mlp_out.value[i].defined()) {
      r.mlp_out_estimate[l] = per_position(clean_run.cache.at(hook_name(l, "hook_mlp_out")),
                                           corrupted.mlp_out.value[i], corrupted.mlp_out.grad[i])
                                  .sum();
    }
    const torch::Tensor g =
        head_output_gradient(model, l, corrupted.attn_out.grad[i]);  // (1, nh, T, hs)
    const torch::Tensor dz = clean_run.cache.at(hook_name(l, "attn.hook_z")) - corrupted.z[i];
    r.head_positions_estimate[l] =
        (g.to(torch::kFloat64) * dz.to(torch::kFloat64)).sum(-1)[0] / span;  // (nh, T)
  }
  r.heads_estimate = r.head_positions_estimate.sum(-1);

  // The exact runs, a layer's sites together, from the corrupted run's stream at that layer.
  std::map<int64_t, std::vector<Site>> sites_at;
  for (int64_t l = 0; l < L; ++l) {
    std::vector<Site>& sites = sites_at[l];
    for (int64_t h = 0; h < nh && exact == ExactPatching::kEverySite; ++h)
      sites.push_back(
          {hook_name(l, "attn.hook_z"), h, -1, r.heads.data_ptr<double>() + l * nh + h});
    for (int64_t p = first_difference; p < T && exact == ExactPatching::kEverySite; ++p)
      sites.push_back(
          {hook_name(l, "hook_resid_pre"), -1, p, r.resid_pre.data_ptr<double>() + l * T + p});
    sites.push_back({hook_name(l, "hook_attn_out"), -1, -1, r.attn_out.data_ptr<double>() + l});
    if (clean_run.cache.contains(hook_name(l, "hook_mlp_out")))
      sites.push_back({hook_name(l, "hook_mlp_out"), -1, -1, r.mlp_out.data_ptr<double>() + l});
  }
  if (exact == ExactPatching::kNone) return r;
  for (const auto& [layer, sites] : sites_at) {
    const torch::Tensor prefix =
        corrupted.resid_pre.value[static_cast<size_t>(layer)];  // (1, T, C)
    for (size_t start = 0; start < sites.size(); start += static_cast<size_t>(batch_size)) {
      const size_t end = std::min(sites.size(), start + static_cast<size_t>(batch_size));
      std::map<std::string, std::vector<std::pair<int64_t, const Site*>>> by_hook;
      for (size_t i = start; i < end; ++i)
        by_hook[sites[i].hook].emplace_back(static_cast<int64_t>(i - start), &sites[i]);
      std::vector<HookHandle> patches;
      for (auto& [name, rows] : by_hook)
        patches.push_back(model->add_hook(name, patch_rows(clean_run.cache.at(name)[0], rows)));
      const torch::Tensor normalized =
          model->forward_from(layer, prefix.expand({static_cast<int64_t>(end - start), T, -1}));
      const torch::Tensor at_p = model->unembed(normalized.select(1, P)).to(torch::kFloat64);
      const torch::Tensor diff = at_p.select(1, r.clean_answer) - at_p.select(1, r.corrupt_answer);
      for (size_t i = start; i < end; ++i)
        *sites[i].out =
            (diff[static_cast<int64_t>(i - start)].item<double>() - r.corrupt_diff) / span;
    }
  }
  if (exact != ExactPatching::kEverySite) return r;
  const auto values = [](const torch::Tensor& t) {
    const torch::Tensor c = t.contiguous();
    return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
  };
  r.heads_agreement = rank_agreement(values(r.heads), values(r.heads_estimate), 3);
  // Over every (layer, position), index l T + p: before the first difference both are 0.
  r.resid_pre_agreement = rank_agreement(values(r.resid_pre), values(r.resid_pre_estimate), 3);
  return r;
}

}  // namespace tinylm
