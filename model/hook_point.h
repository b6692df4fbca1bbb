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
//
// Hooks belong to the thread that adds them: a forward pass sees only its own thread's. So
// one model serves many threads read-only (the lab's requests), each with its own ablations
// and caches, and a hook never leaks into another thread's pass. A handle is removed on the
// thread that added it.

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
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
      : name_(scope.prefix + name), id_(next_point_id()) {
    if (present && scope.list) scope.list->push_back(this);
  }
  HookPoint(const HookPoint&) = delete;  // the list holds its address
  HookPoint& operator=(const HookPoint&) = delete;

  torch::Tensor operator()(torch::Tensor x) const {
    const Hooks* hooks = this_thread_hooks();
    if (!hooks) return x;  // the common case: one lookup, no copy
    for (const auto& [id, hook] : *hooks) x = hook(x, name_);
    return x;
  }

  const std::string& name() const { return name_; }
  bool has_hooks() const { return this_thread_hooks() != nullptr; }

  [[nodiscard]] HookHandle add(HookFn hook);

 private:
  using Hooks = std::vector<std::pair<uint64_t, HookFn>>;
  // This thread's hooks, by point id (never an address: a new model may reuse a freed one's).
  // Only non-empty lists are kept.
  using ThreadHooks = std::unordered_map<uint64_t, Hooks>;
  friend class HookHandle;

  static ThreadHooks& thread_hooks() {
    thread_local ThreadHooks hooks;
    return hooks;
  }
  static uint64_t next_point_id() {
    static std::atomic<uint64_t> next{0};
    return next++;
  }
  const Hooks* this_thread_hooks() const {
    const ThreadHooks& all = thread_hooks();
    if (all.empty()) return nullptr;
    const auto it = all.find(id_);
    return it == all.end() ? nullptr : &it->second;
  }

  std::string name_;
  uint64_t id_;
};

// Removes its hook when destroyed (or on remove()), on the thread that added it. Safe to
// outlive the model: it names the point by id.
class HookHandle {
 public:
  HookHandle() = default;
  HookHandle(HookHandle&& other) noexcept { *this = std::move(other); }
  HookHandle& operator=(HookHandle&& other) noexcept {
    if (this != &other) {
      remove();
      point_ = other.point_;
      id_ = other.id_;
      other.point_.reset();
    }
    return *this;
  }
  HookHandle(const HookHandle&) = delete;
  HookHandle& operator=(const HookHandle&) = delete;
  ~HookHandle() { remove(); }

  void remove() {
    if (!point_) return;
    HookPoint::ThreadHooks& all = HookPoint::thread_hooks();
    if (const auto it = all.find(*point_); it != all.end()) {
      HookPoint::Hooks& hooks = it->second;
      for (auto hook = hooks.begin(); hook != hooks.end(); ++hook) {
        if (hook->first == id_) {
          hooks.erase(hook);
          break;
        }
      }
      if (hooks.empty()) all.erase(it);
    }
    point_.reset();
  }

 private:
  friend class HookPoint;
  HookHandle(uint64_t point, uint64_t id) : point_(point), id_(id) {}

  std::optional<uint64_t> point_;  // the HookPoint's id; empty once removed
  uint64_t id_ = 0;
};

inline HookHandle HookPoint::add(HookFn hook) {
  // Ids only tell a point's hooks apart; a process-wide counter keeps them unique.
  static std::atomic<uint64_t> next_hook{0};
  const uint64_t id = next_hook++;
  thread_hooks()[id_].emplace_back(id, std::move(hook));
  return HookHandle(id_, id);
}

}  // namespace tinylm
