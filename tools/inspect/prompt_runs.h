#pragma once
// The forward pass of a prompt, keeping what the views that read one prompt read: the
// attention maps, the logit lens and logit attribution (prompt_view_points). An invocation runs one
// pass per prompt; the lab keeps one PromptRuns per served checkpoint (in its
// InspectionCache), so a click on another view of the same prompt runs none.
// Passes are dropped, least recently used first, once those kept pass `budget_bytes`; a
// pass bigger than the budget is handed out and not kept.

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <vector>

#include "model/activation_cache.h"

namespace tinylm {

// What the lab keeps per checkpoint: a few prompts of a small model, one of GPT-2 small's
// (its patterns alone are 12 x 12 x T x T floats).
inline constexpr int64_t kPromptRunsBytes = int64_t{512} << 20;

HookFilter prompt_view_points();

class PromptRuns {
 public:
  explicit PromptRuns(int64_t budget_bytes = kPromptRunsBytes) : budget_(budget_bytes) {}

  // ids: (T,) int64. Thread-safe; two callers of a prompt not kept yet may both run it.
  std::shared_ptr<const CachedRun> of(GPT& model, const torch::Tensor& ids);

  int64_t passes() const;  // forward passes run so far
  int64_t kept_bytes() const;

 private:
  struct Kept {
    std::vector<int64_t> ids;
    std::shared_ptr<const CachedRun> run;
    int64_t bytes;
  };
  const int64_t budget_;
  mutable std::mutex mutex_;
  std::list<Kept> kept_;  // most recently used first
  int64_t bytes_ = 0, passes_ = 0;
};

}  // namespace tinylm
