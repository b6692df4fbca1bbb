#pragma once
// What inspection keeps of one checkpoint between requests, so that a view asked for again,
// or another view of the same prompt or window set, runs no forward pass again: the
// prompts' passes (prompt_runs.h); each window set's surveys (its windows' and its induction
// probe's, model/analysis/window_survey.h) and the ablation tables made from them; and the
// text's loss by position and context drift. An invocation of `inspect` fills one and drops
// it; the lab keeps one per served checkpoint, and a new checkpoint brings a new, empty one.
// A request with heads ablated (--ablate-heads) must use its own: its model is not the
// checkpoint's. Thread-safe; two requests for a result not kept yet may both compute it.

#include <atomic>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>

#include <torch/torch.h>

#include "model/analysis/ablation.h"
#include "model/analysis/window_survey.h"
#include "tools/inspect/inspection.h"
#include "tools/inspect/prompt_runs.h"

namespace tinylm {

// A window set's two surveys, and what they hold beyond the losses.
struct WindowSetSurveys {
  WindowSurvey windows, probe;
  bool scores = false;       // head scores
  bool attribution = false;  // ablation's head outputs and gradients
};

class InspectionCache {
 public:
  PromptRuns prompts;

  // The surveys of `data` holding at least what is asked; `survey(scores, attribution)` runs
  // them when none kept does (asked for more than the kept ones hold, it is asked for both).
  using Survey = std::function<WindowSetSurveys(bool scores, bool attribution)>;
  std::shared_ptr<const WindowSetSurveys> surveys(const InspectData& data, bool scores,
                                                  bool attribution, const Survey& survey);
  std::shared_ptr<const AblationTable> ablation(const InspectData& data, int64_t exact,
                                                const std::function<AblationTable()>& make);
  std::shared_ptr<const PositionLossView> position_loss(
      const std::string& source, int64_t context, int64_t tokens,
      const std::function<PositionLossView()>& make);
  std::shared_ptr<const DriftView> drift(const std::string& source, const std::string& token,
                                         int64_t tokens, const std::function<DriftView()>& make);

  // Surveys, tables and views computed so far (prompt passes: prompts.passes()).
  int64_t computed() const { return computed_; }

  // Each kind keeps its most recently used results, this many.
  static constexpr size_t kKept = 8;

 private:
  // Results of one kind by key, most recently used first.
  template <class Key, class Value>
  class Kept {
   public:
    // The kept value of `key` that `enough` accepts, or make(the kept one, or null)'s,
    // kept in its place.
    template <class Enough, class Make>
    std::shared_ptr<const Value> get(const Key& key, Enough&& enough, Make&& make,
                                     std::atomic<int64_t>& computed);

   private:
    std::mutex mutex_;
    std::list<std::pair<Key, std::shared_ptr<const Value>>> kept_;
  };

  // A window set is its windows and probe, compared by value.
  struct WindowSet {
    std::string source;
    torch::Tensor windows, probe;
    int64_t exact = 0;  // for ablation tables
    bool operator==(const WindowSet& other) const;
  };
  using TextView = std::tuple<std::string, std::string, int64_t>;  // source, what, tokens

  Kept<WindowSet, WindowSetSurveys> surveys_;
  Kept<WindowSet, AblationTable> ablations_;
  Kept<TextView, PositionLossView> position_losses_;
  Kept<TextView, DriftView> drifts_;
  std::atomic<int64_t> computed_{0};
};

}  // namespace tinylm
