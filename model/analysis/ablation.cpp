#include "model/analysis/ablation.h"

#include <algorithm>
#include <stdexcept>

#include "model/activation_cache.h"
#include "model/analysis/induction_probe.h"
#include "model/scoped_mode.h"
#include "model/window_loss.h"

namespace tinylm {
namespace {

constexpr int64_t kBatch = 8;  // windows per forward pass

}  // namespace

std::vector<HeadRef> parse_head_list(const std::string& text) {
  std::vector<HeadRef> heads;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, comma - start);
    const size_t dot = item.find('.');
    const auto is_number = [](const std::string& s) {
      return !s.empty() && s.size() < 9 &&
             std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
    };
    if (dot == std::string::npos || !is_number(item.substr(0, dot)) ||
        !is_number(item.substr(dot + 1))) {
      throw std::invalid_argument("bad head \"" + item + "\" in \"" + text +
                                  "\": write LAYER.HEAD, e.g. 0.3, and separate heads with commas");
    }
    heads.push_back({std::stoll(item.substr(0, dot)), std::stoll(item.substr(dot + 1))});
    start = comma + 1;
  }
  return heads;
}

void check_heads(const ModelConfig& config, const std::vector<HeadRef>& heads) {
  for (const HeadRef& h : heads) {
    if (h.layer >= config.n_layer || h.head >= config.n_head) {
      throw std::invalid_argument("head " + h.label() + " is not in this model: layers are 0-" +
                                  std::to_string(config.n_layer - 1) + " and heads 0-" +
                                  std::to_string(config.n_head - 1));
    }
  }
}

HookHandle ablate_head(GPT& model, HeadRef head, torch::Tensor value) {
  check_heads(model->config(), {head});
  return model->add_hook(hook_name(head.layer, "attn.hook_z"),
                         [head, value](const torch::Tensor& z, const std::string&) {
                           torch::Tensor out = z.clone();                  // (B, nh, T, hs)
                           torch::Tensor slot = out.select(1, head.head);  // (B, T, hs)
                           if (value.defined()) {
                             slot.copy_(value.to(z.dtype()).expand_as(slot));
                           } else {
                             slot.zero_();
                           }
                           return out;
                         });
}

std::vector<HookHandle> zero_ablate(GPT& model, const std::vector<HeadRef>& heads) {
  check_heads(model->config(), heads);
  std::vector<HookHandle> handles;
  for (const HeadRef& h : heads) handles.push_back(ablate_head(model, h));
  return handles;
}

torch::Tensor mean_head_outputs(GPT& model, const torch::Tensor& tokens, int64_t batch_size) {
  const int64_t L = model->config().n_layer;
  torch::Tensor sum;  // (L, nh, hs) float64
  int64_t count = 0;
  for (int64_t start = 0; start < tokens.size(0); start += batch_size) {
    const torch::Tensor batch =
        tokens.slice(0, start, std::min(tokens.size(0), start + batch_size));
    const CachedRun run = run_with_cache(model, batch, names_ending_with("attn.hook_z"));
    std::vector<torch::Tensor> layers;
    for (int64_t l = 0; l < L; ++l) {
      layers.push_back(run.cache.at(hook_name(l, "attn.hook_z"))
                           .to(torch::kFloat64)
                           .sum(std::vector<int64_t>{0, 2}));
    }
    const torch::Tensor s = torch::stack(layers);  // (L, nh, hs)
    sum = sum.defined() ? sum + s : s;
    count += batch.size(0) * batch.size(1);
  }
  return (sum / static_cast<double>(count)).to(torch::kFloat32);
}

AblationTable ablation_table(GPT& model, const torch::Tensor& windows, const torch::Tensor& probe) {
  torch::NoGradGuard no_grad;
  const ScopedMode eval = eval_mode(*model);
  const int64_t T = windows.size(1) - 1;
  const torch::Tensor means = mean_head_outputs(model, windows.slice(1, 0, T));  // (L, nh, hs)
  const auto loss = [&] { return window_loss(model, windows, kBatch).mean(); };
  const auto probe_loss = [&] { return probe_losses(model, probe).second_half; };
  AblationTable table;
  table.loss = loss();
  table.probe_loss = probe_loss();
  for (int64_t l = 0; l < model->config().n_layer; ++l) {
    for (int64_t h = 0; h < model->config().n_head; ++h) {
      HeadAblation row;
      row.head = {l, h};
      {
        const HookHandle zero = ablate_head(model, row.head);
        row.zero = loss() - table.loss;
        row.probe_zero = probe_loss() - table.probe_loss;
      }
      {
        const HookHandle mean = ablate_head(model, row.head, means[l][h]);
        row.mean = loss() - table.loss;
        row.probe_mean = probe_loss() - table.probe_loss;
      }
      table.heads.push_back(row);
    }
  }
  std::stable_sort(table.heads.begin(), table.heads.end(),
                   [](const HeadAblation& a, const HeadAblation& b) { return a.zero > b.zero; });
  return table;
}

}  // namespace tinylm
