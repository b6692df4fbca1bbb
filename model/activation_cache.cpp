#include "model/activation_cache.h"

#include <stdexcept>

namespace tinylm {

const torch::Tensor& ActivationCache::at(const std::string& name) const {
  const auto it = tensors_.find(name);
  if (it != tensors_.end()) return it->second;
  std::string held;
  for (const auto& [key, tensor] : tensors_) held += (held.empty() ? "" : ", ") + key;
  throw std::out_of_range("the activation cache holds no \"" + name + "\" (it holds " +
                          (held.empty() ? std::string("nothing") : held) + ")");
}

std::vector<std::string> ActivationCache::names() const {
  std::vector<std::string> names;
  for (const auto& [key, tensor] : tensors_) names.push_back(key);
  return names;
}

CachedRun run_with_cache(GPT& model, const torch::Tensor& tokens, const HookFilter& filter) {
  torch::NoGradGuard no_grad;
  CachedRun run;
  std::vector<HookHandle> handles;
  for (const std::string& name : model->hook_names()) {
    if (filter && !filter(name)) continue;
    handles.push_back(model->add_hook(name, [&run](const torch::Tensor& x, const std::string& n) {
      run.cache.insert(n, x.detach());
      return x;
    }));
  }
  run.logits = model->forward(tokens);
  return run;
}

HookFilter names_ending_with(const std::string& suffix) {
  return [suffix](const std::string& name) {
    return name.size() >= suffix.size() &&
           name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
}

}  // namespace tinylm
