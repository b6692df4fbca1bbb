#include "train/step_profile.h"

#include <algorithm>
#include <chrono>
#include <map>

#include <torch/csrc/autograd/profiler_kineto.h>

namespace tinylm {
namespace {

using torch::autograd::profiler::KinetoEvent;

constexpr const char* kScopePrefix = "tinylm::";
constexpr const char* kBackwardPrefix = "autograd::engine::evaluate_function: ";

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// One operator call, placed in its thread's tree of calls.
struct Call {
  const KinetoEvent* event;
  int parent = -1;  // index into the calls, -1 at the top
  double self_us = 0.0;
};

// Each thread's calls nested by time: a call is inside the last one still open at its start.
std::vector<Call> nest(const std::vector<KinetoEvent>& events) {
  std::vector<const KinetoEvent*> sorted;
  for (const KinetoEvent& e : events) {
    if (e.deviceType() == c10::DeviceType::CPU) sorted.push_back(&e);
  }
  std::sort(sorted.begin(), sorted.end(), [](const KinetoEvent* a, const KinetoEvent* b) {
    if (a->startThreadId() != b->startThreadId()) return a->startThreadId() < b->startThreadId();
    if (a->startUs() != b->startUs()) return a->startUs() < b->startUs();
    return a->durationUs() > b->durationUs();  // the enclosing call first
  });
  std::vector<Call> calls;
  std::vector<int> open;
  for (const KinetoEvent* e : sorted) {
    while (!open.empty()) {
      const KinetoEvent* top = calls[static_cast<size_t>(open.back())].event;
      const bool same_thread = top->startThreadId() == e->startThreadId();
      if (same_thread && top->startUs() + top->durationUs() > e->startUs()) break;
      open.pop_back();
    }
    Call call{e, open.empty() ? -1 : open.back(), static_cast<double>(e->durationUs())};
    if (call.parent >= 0) calls[static_cast<size_t>(call.parent)].self_us -= call.self_us;
    open.push_back(static_cast<int>(calls.size()));
    calls.push_back(call);
  }
  return calls;
}

using Forwards = std::map<std::pair<uint64_t, int64_t>, std::string>;

// The category a call's place gives it: its innermost tinylm scope, or, in the backward
// pass, the category of the forward call that made its node; empty when neither.
std::string placed_category(const std::vector<Call>& calls, int i, const Forwards& forward) {
  for (; i >= 0; i = calls[static_cast<size_t>(i)].parent) {
    const KinetoEvent& e = *calls[static_cast<size_t>(i)].event;
    const std::string name = e.name();
    if (starts_with(name, kScopePrefix)) return name.substr(std::string(kScopePrefix).size());
    if (starts_with(name, kBackwardPrefix)) {
      const auto it = forward.find({e.startThreadId(), e.sequenceNr()});
      if (it != forward.end()) return it->second;
    }
  }
  return "";
}

}  // namespace

const std::vector<std::string>& profile_categories() {
  static const std::vector<std::string> names = {"matmul",    "attention",   "norm",
                                                 "rotary",    "activation",  "loss",
                                                 "optimizer", "elementwise", "rest"};
  return names;
}

std::string category_of_op(const std::string& name) {
  static const std::vector<std::string> matmul = {"aten::mm", "aten::addmm", "aten::bmm",
                                                  "aten::mv", "aten::addmv", "aten::dot"};
  // Moving, viewing and making tensors, and autograd's own bookkeeping: not arithmetic.
  static const std::vector<std::string> rest = {"aten::empty",
                                                "aten::copy_",
                                                "aten::clone",
                                                "aten::contiguous",
                                                "aten::as_strided",
                                                "aten::view",
                                                "aten::reshape",
                                                "aten::_reshape_alias",
                                                "aten::expand",
                                                "aten::slice",
                                                "aten::select",
                                                "aten::transpose",
                                                "aten::t",
                                                "aten::permute",
                                                "aten::split",
                                                "aten::chunk",
                                                "aten::cat",
                                                "aten::stack",
                                                "aten::fill_",
                                                "aten::zero_",
                                                "aten::zeros",
                                                "aten::ones",
                                                "aten::full",
                                                "aten::detach",
                                                "aten::resolve",
                                                "aten::to",
                                                "aten::_to_copy",
                                                "aten::narrow",
                                                "aten::unsqueeze",
                                                "aten::squeeze",
                                                "aten::index",
                                                "aten::embedding",
                                                "aten::set_",
                                                "aten::lift",
                                                "aten::item",
                                                "aten::_local_scalar_dense",
                                                "aten::unbind",
                                                "aten::split_with_sizes",
                                                "aten::unsafe_split",
                                                "aten::new_",
                                                "aten::scalar_tensor"};
  const auto any_prefix = [&](const std::vector<std::string>& prefixes) {
    return std::any_of(prefixes.begin(), prefixes.end(),
                       [&](const std::string& p) { return name.rfind(p, 0) == 0; });
  };
  const auto contains = [&](const char* part) { return name.find(part) != std::string::npos; };
  if (any_prefix(matmul) || contains("BatchedMatmul")) return "matmul";
  // The backward nodes of the fused kernels (model/kernels/): no forward operator shares
  // their sequence number, so they go by their names.
  if (contains("CppNode") && contains("CausalAttention")) return "attention";
  if (contains("CppNode") && contains("RowNorm")) return "norm";  // RMSNorm and LayerNorm
  if (contains("CppNode") && contains("Swiglu")) return "activation";
  if (contains("CppNode") && contains("FusedLinear")) return "matmul";
  if (name.find("softmax") != std::string::npos && name.find("log_softmax") == std::string::npos) {
    return "attention";
  }
  if (name.find("nll_loss") != std::string::npos || name.find("log_softmax") != std::string::npos ||
      name.find("cross_entropy") != std::string::npos) {
    return "loss";
  }
  if (name.find("layer_norm") != std::string::npos) return "norm";
  if (any_prefix(rest) || !starts_with(name, "aten::")) return "rest";
  return "elementwise";
}

StepProfile profile_steps(const std::function<void()>& step, int steps) {
  namespace profiler = torch::autograd::profiler;
  using torch::profiler::impl::ActivityType;
  using torch::profiler::impl::ProfilerConfig;
  using torch::profiler::impl::ProfilerState;
  step();  // warm-up, unprofiled
  const ProfilerConfig config(ProfilerState::KINETO);
  profiler::prepareProfiler(config, {ActivityType::CPU});
  profiler::enableProfiler(config, {ActivityType::CPU});
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < steps; ++i) step();
  const double wall_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  const std::unique_ptr<profiler::ProfilerResult> result = profiler::disableProfiler();
  const std::vector<Call> calls = nest(result->events());

  // Forward calls that made autograd nodes, by thread and sequence number (each thread counts
  // its own; a backward runs on its forward's thread here): their places' categories.
  Forwards forward;
  for (size_t i = 0; i < calls.size(); ++i) {
    const KinetoEvent& e = *calls[i].event;
    if (e.sequenceNr() < 0 || starts_with(e.name(), kBackwardPrefix)) continue;
    std::string category = placed_category(calls, static_cast<int>(i), {});
    if (category.empty()) category = category_of_op(e.name());
    forward.emplace(std::pair{e.startThreadId(), e.sequenceNr()}, category);
  }
  std::map<std::string, double> by_category;
  std::map<std::pair<std::string, std::string>, std::pair<double, int64_t>> by_op;
  double total_us = 0.0;
  for (size_t i = 0; i < calls.size(); ++i) {
    const std::string name = calls[i].event->name();
    std::string category = placed_category(calls, static_cast<int>(i), forward);
    if (category.empty()) category = category_of_op(name);
    by_category[category] += calls[i].self_us;
    auto& op = by_op[{name, category}];
    op.first += calls[i].self_us;
    op.second += 1;
    total_us += calls[i].self_us;
  }
  StepProfile profile;
  const double per_step_ms = 1e-3 / std::max(1, steps);
  for (const std::string& c : profile_categories()) {
    profile.categories.emplace_back(c, by_category[c] * per_step_ms);
  }
  for (const auto& [key, value] : by_op) {
    profile.ops.push_back(
        {key.first, key.second, value.first * per_step_ms, value.second / std::max(1, steps)});
  }
  std::sort(profile.ops.begin(), profile.ops.end(),
            [](const ProfiledOp& a, const ProfiledOp& b) { return a.ms > b.ms; });
  profile.total_ms = total_us * per_step_ms;
  profile.wall_ms = wall_ms / std::max(1, steps);
  return profile;
}

}  // namespace tinylm
