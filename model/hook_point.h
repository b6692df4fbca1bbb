#pragma once
// A hook point: a named identity placed where the model makes a tensor, after
// TransformerLens. With no hook attached, calling it returns its input and does nothing
// else. A hook sees the tensor and returns what flows on: the same tensor to read it
// (caching), another of the same shape to replace it (ablation, patching). A hook lives as
// long as the HookHandle that add() returns; several hooks on one point run in the order
// they were added. Hook points are not torch modules: they hold no parameters and do not
// appear in a state dict.
//
// Each is declared once, as a member of the module that makes its tensor, with its short
// name: `HookPoint hook_q{scope_, "hook_q"};`. The module's HookScope, handed down the module
// tree, gives the full name ("blocks.1.attn.hook_q") and the model-wide list the point
// joins. Members are built in the order they are declared, so a module declares its hook
// points, and builds its submodules between them, in the order its forward pass reaches
// them; the list is then in forward order.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

namespace tinylm {

using HookFn = std::function<torch::Tensor(const torch::Tensor& x, const std::string& name)>;

class HookHandle;
class HookPoint;

using HookList = std::vector<HookPoint*>;

// A module's place among the hook names: the list its points join and their prefix. The
// default scope lists its points nowhere, under their short names (a module built alone).
struct HookScope {
  HookList* list = nullptr;
  std::string prefix;  // "blocks.1.attn."
  HookScope operator/(const std::string& child) const { return {list, prefix + child + "."}; }
};

// "blocks.{layer}.{suffix}", the name of a hook point inside block `layer`.
inline std::string hook_name(int64_t layer, const std::string& suffix) {
  return "blocks." + std::to_string(layer) + "." + suffix;
}

class HookPoint {
 public:
  // Named scope.prefix + name. Joins the scope's list unless `present` is false: a point of
  // an option this model does not have (hook_rot_q without rotary positions), which never
  // fires.
  HookPoint(const HookScope& scope, const std::string& name, bool present = true)
      : name_(scope.prefix + name) {
    if (present && scope.list) scope.list->push_back(this);
  }
  HookPoint(const HookPoint&) = delete;  // the list holds its address
  HookPoint& operator=(const HookPoint&) = delete;

  torch::Tensor operator()(torch::Tensor x) const {
    if (hooks_->empty()) return x;  // the common case: one branch, no copy
    for (const auto& [id, hook] : *hooks_) x = hook(x, name_);
    return x;
  }

  const std::string& name() const { return name_; }
  bool has_hooks() const { return !hooks_->empty(); }

  [[nodiscard]] HookHandle add(HookFn hook);

 private:
  using Hooks = std::vector<std::pair<uint64_t, HookFn>>;
  friend class HookHandle;

  std::string name_;
  std::shared_ptr<Hooks> hooks_ = std::make_shared<Hooks>();
  uint64_t next_id_ = 0;
};

// Removes its hook when destroyed (or on remove()). Safe to outlive the model: it holds the
// hook list weakly.
class HookHandle {
 public:
  HookHandle() = default;
  HookHandle(HookHandle&& other) noexcept { *this = std::move(other); }
  HookHandle& operator=(HookHandle&& other) noexcept {
    if (this != &other) {
      remove();
      hooks_ = std::move(other.hooks_);
      id_ = other.id_;
      other.hooks_.reset();
    }
    return *this;
  }
  HookHandle(const HookHandle&) = delete;
  HookHandle& operator=(const HookHandle&) = delete;
  ~HookHandle() { remove(); }

  void remove() {
    if (auto hooks = hooks_.lock()) {
      for (auto it = hooks->begin(); it != hooks->end(); ++it) {
        if (it->first == id_) {
          hooks->erase(it);
          break;
        }
      }
    }
    hooks_.reset();
  }

 private:
  friend class HookPoint;
  HookHandle(std::weak_ptr<HookPoint::Hooks> hooks, uint64_t id)
      : hooks_(std::move(hooks)), id_(id) {}

  std::weak_ptr<HookPoint::Hooks> hooks_;
  uint64_t id_ = 0;
};

inline HookHandle HookPoint::add(HookFn hook) {
  const uint64_t id = next_id_++;
  hooks_->emplace_back(id, std::move(hook));
  return HookHandle(hooks_, id);
}

}  // namespace tinylm
