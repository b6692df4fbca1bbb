#include "train/run/snapshots.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>

#include "train/run/safetensors.h"

namespace tinylm {
namespace fs = std::filesystem;

namespace {

// 1, 2 or 5 times a power of ten.
bool log_spaced(int64_t step) {
  if (step <= 0) return step == 0;
  while (step % 10 == 0) step /= 10;
  return step == 1 || step == 2 || step == 5;
}

const std::vector<std::string>& score_names() {
  static const std::vector<std::string> names = {"ov_copying", "entropy", "mean_distance",
                                                 "previous_token", "induction"};
  return names;
}

torch::Tensor* score_of(HeadSnapshot& s, const std::string& name) {
  if (name == "ov_copying") return &s.ov_copying;
  if (name == "entropy") return &s.entropy;
  if (name == "mean_distance") return &s.mean_distance;
  if (name == "previous_token") return &s.previous_token;
  return &s.induction;
}

}  // namespace

bool is_snapshot_step(int64_t step, int64_t eval_interval, int64_t max_iters) {
  return log_spaced(step) || step % eval_interval == 0 || step == max_iters;
}

fs::path snapshot_path(const fs::path& run_dir, int64_t step) {
  char name[48];
  std::snprintf(name, sizeof name, "step_%08lld.safetensors", static_cast<long long>(step));
  return run_dir / "snapshots" / name;
}

void save_snapshot(const fs::path& run_dir, int64_t step, const HeadSnapshot& s,
                   const torch::Tensor& text, const torch::Tensor& probe) {
  NamedTensors t = {{"text_tokens", text.to(torch::kInt64)},
                    {"probe_tokens", probe.to(torch::kInt64)},
                    {"text_pattern", s.text_pattern.to(torch::kHalf)},
                    {"probe_pattern", s.probe_pattern.to(torch::kHalf)}};
  if (s.position_pattern.defined())
    t.emplace_back("position_pattern", s.position_pattern.to(torch::kHalf));
  HeadSnapshot copy = s;
  for (const std::string& name : score_names())
    t.emplace_back(name, score_of(copy, name)->to(torch::kFloat32));
  fs::create_directories(run_dir / "snapshots");
  save_safetensors(snapshot_path(run_dir, step), t,
                   {{"format", "tinylm-snapshot/1"}, {"step", std::to_string(step)}});
}

std::vector<StoredSnapshot> load_snapshots(const fs::path& run_dir) {
  std::vector<StoredSnapshot> out;
  const fs::path dir = run_dir / "snapshots";
  if (!fs::is_directory(dir)) return out;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const fs::path path = entry.path();
    if (path.extension() != ".safetensors") continue;  // a leftover temporary, say
    const Safetensors file = load_safetensors(path);
    const auto step = file.metadata.find("step");
    const auto need = [&](const std::string& name) {
      const auto it = file.tensors.find(name);
      if (it == file.tensors.end())
        throw std::runtime_error(path.string() + " is not a tinylm snapshot: it has no " + name);
      return it->second;
    };
    if (step == file.metadata.end())
      throw std::runtime_error(path.string() +
                               " is not a tinylm snapshot: no step in its metadata");
    StoredSnapshot s;
    s.step = std::stoll(step->second);
    s.text = need("text_tokens");
    s.probe = need("probe_tokens");
    s.heads.text_pattern = need("text_pattern").to(torch::kFloat32);
    s.heads.probe_pattern = need("probe_pattern").to(torch::kFloat32);
    if (file.tensors.count("position_pattern"))
      s.heads.position_pattern = need("position_pattern").to(torch::kFloat32);
    for (const std::string& name : score_names()) *score_of(s.heads, name) = need(name);
    out.push_back(std::move(s));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.step < b.step; });
  return out;
}

torch::Tensor formation_steps(const std::vector<int64_t>& steps, const torch::Tensor& scores) {
  const torch::Tensor s = scores.to(torch::kFloat64).contiguous();  // (S, L, nh)
  const int64_t S = s.size(0), n = s[0].numel();
  torch::Tensor out = torch::full({n}, std::numeric_limits<double>::quiet_NaN(), torch::kFloat64);
  const torch::Tensor flat = s.view({S, n});
  for (int64_t h = 0; h < n; ++h) {
    const double last = flat[S - 1][h].item<double>();
    // A score at half its last from the start never crossed it: that head did not form.
    if (!(last > 0) || flat[0][h].item<double>() >= last / 2) continue;
    for (int64_t i = 1; i < S; ++i) {
      if (flat[i][h].item<double>() >= last / 2) {
        out[h] = static_cast<double>(steps[static_cast<size_t>(i)]);
        break;
      }
    }
  }
  return out.view(s[0].sizes());
}

}  // namespace tinylm
