#pragma once
// run_with_cache: one forward pass that keeps the tensors of the hook points a filter
// selects, by name, detached. The hooks it adds are gone when it returns.

#include <functional>
#include <map>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "model/gpt.h"

namespace tinylm {

class ActivationCache {
 public:
  // Throws std::out_of_range naming the missing hook and what the cache holds.
  const torch::Tensor& at(const std::string& name) const;
  bool contains(const std::string& name) const { return tensors_.count(name) != 0; }
  std::vector<std::string> names() const;
  size_t size() const { return tensors_.size(); }

  void insert(const std::string& name, torch::Tensor tensor) { tensors_[name] = std::move(tensor); }

 private:
  std::map<std::string, torch::Tensor> tensors_;
};

using HookFilter = std::function<bool(const std::string& name)>;

struct CachedRun {
  torch::Tensor logits;  // (B, T, V)
  ActivationCache cache;
};

// tokens: (B, T) int64. With no filter every hook point is kept. Runs under NoGradGuard;
// hooks the caller attached (ablations) stay in force and the cache sees their effect.
CachedRun run_with_cache(GPT& model, const torch::Tensor& tokens, const HookFilter& filter = {});

// A filter for the names that end with `suffix` ("attn.hook_pattern").
HookFilter names_ending_with(const std::string& suffix);

}  // namespace tinylm
