#include "tools/inspect/prompt_runs.h"

#include "model/analysis/logit_attribution.h"
#include "model/analysis/logit_lens.h"
#include "model/scoped_mode.h"

namespace tinylm {

namespace {

int64_t bytes_of(const CachedRun& run) {
  int64_t bytes = static_cast<int64_t>(run.logits.nbytes());
  for (const std::string& name : run.cache.names())
    bytes += static_cast<int64_t>(run.cache.at(name).nbytes());
  return bytes;
}

}  // namespace

HookFilter prompt_view_points() {
  const HookFilter pattern = names_ending_with("attn.hook_pattern"), lens = logit_lens_points(),
                   attribution = logit_attribution_points();
  return [=](const std::string& n) { return pattern(n) || lens(n) || attribution(n); };
}

std::shared_ptr<const CachedRun> PromptRuns::of(GPT& model, const torch::Tensor& ids) {
  const torch::Tensor flat = ids.to(torch::kInt64).contiguous();
  std::vector<int64_t> key(flat.data_ptr<int64_t>(), flat.data_ptr<int64_t>() + flat.numel());
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = kept_.begin(); it != kept_.end(); ++it) {
      if (it->ids != key) continue;
      kept_.splice(kept_.begin(), kept_, it);
      return it->run;
    }
  }
  auto run = [&] {
    const ScopedMode eval = eval_mode(*model);
    return std::make_shared<const CachedRun>(
        run_with_cache(model, flat.unsqueeze(0), prompt_view_points()));
  }();
  const int64_t bytes = bytes_of(*run);
  const std::lock_guard<std::mutex> lock(mutex_);
  ++passes_;
  if (bytes > budget_) return run;
  kept_.push_front({std::move(key), run, bytes});
  bytes_ += bytes;
  while (bytes_ > budget_) {
    bytes_ -= kept_.back().bytes;
    kept_.pop_back();
  }
  return run;
}

int64_t PromptRuns::passes() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return passes_;
}

int64_t PromptRuns::kept_bytes() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return bytes_;
}

}  // namespace tinylm
