#include "model/sae/sae_evaluation.h"

#include <limits>

#include "model/window_loss.h"

namespace tinylm {

namespace {
constexpr int64_t kWindowsPerPass = 16;
}

double spliced_loss(GPT& model, const HookRows& hook, const torch::Tensor& windows,
                    const RowMap& replace) {
  const HookHandle splice = model->add_hook(hook.hook(), [&](const torch::Tensor& x, const std::string&) {
    const torch::Tensor rows = hook.to_rows(x).to(torch::kFloat32);
    return hook.from_rows(replace(rows), x).to(x.dtype());
  });
  return window_loss(model, windows, kWindowsPerPass).mean();
}

SaeEvaluation evaluate_sae(GPT& model, const HookRows& hook, const SparseAutoencoder& sae,
                           const torch::Tensor& windows) {
  const torch::NoGradGuard no_grad;
  SaeEvaluation e;
  const int64_t T = windows.size(1) - 1;
  double error = 0.0, active = 0.0;
  torch::Tensor sum, sum_sq;  // per dimension, for the variance around the mean (double)
  for (int64_t first = 0; first < windows.size(0); first += kWindowsPerPass) {
    const torch::Tensor inputs = windows.slice(0, first, first + kWindowsPerPass).slice(1, 0, T);
    const torch::Tensor x = hook.collect(inputs);
    const torch::Tensor z = sae.encode(x);
    error += (sae.decode(z) - x).to(torch::kFloat64).square().sum().item<double>();
    active += (z > 0).sum().item<double>();
    const torch::Tensor x64 = x.to(torch::kFloat64);
    sum = sum.defined() ? sum + x64.sum(0) : x64.sum(0);
    sum_sq = sum_sq.defined() ? sum_sq + x64.square().sum(0) : x64.square().sum(0);
    e.tokens += x.size(0);
  }
  const double n = static_cast<double>(e.tokens);
  const double total = (sum_sq - sum.square() / n).sum().item<double>();  // sum |x - mean|^2
  e.explained_variance = 1.0 - error / total;
  e.l0 = active / n;
  e.clean_loss = window_loss(model, windows, kWindowsPerPass).mean();
  e.spliced_loss = spliced_loss(model, hook, windows, [&](const torch::Tensor& rows) {
    return sae.decode(sae.encode(rows));
  });
  e.zero_loss = spliced_loss(model, hook, windows, [](const torch::Tensor& rows) {
    return torch::zeros_like(rows);
  });
  const double span = e.zero_loss - e.clean_loss;
  e.ce_recovered = span == 0.0 ? std::numeric_limits<double>::quiet_NaN()
                               : (e.zero_loss - e.spliced_loss) / span;
  return e;
}

}  // namespace tinylm
