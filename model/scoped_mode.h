#pragma once
// Train or eval mode for one scope: sets it on construction, restores the module's own mode
// on destruction, on every path out (a return, an exception).

#include <torch/torch.h>

namespace tinylm {

class ScopedMode {
 public:
  ScopedMode(torch::nn::Module& module, bool training)
      : module_(module), was_training_(module.is_training()) {
    // A module already in that mode is not written: threads that share a model in eval mode
    // (the lab's requests) then only read it.
    if (was_training_ != training) module_.train(training);
  }
  ~ScopedMode() {
    if (module_.is_training() != was_training_) module_.train(was_training_);
  }
  ScopedMode(const ScopedMode&) = delete;
  ScopedMode& operator=(const ScopedMode&) = delete;

 private:
  torch::nn::Module& module_;
  bool was_training_;
};

// Eval mode (no dropout) for the scope: `const ScopedMode eval = eval_mode(*model);`.
inline ScopedMode eval_mode(torch::nn::Module& module) { return ScopedMode(module, false); }

}  // namespace tinylm
