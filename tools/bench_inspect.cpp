#include "tools/bench_inspect.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <vector>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "tools/cli.h"
#include "tools/inspect/inspect_request.h"
#include "train/precision.h"

namespace tinylm {
namespace {

// The median of `repeats` timings of f, in seconds.
double seconds(int repeats, const std::function<void()>& f) {
  std::vector<double> t;
  for (int r = 0; r < repeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

double peak_resident_mb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;
}

// A prompt of the text's first tokens and the same with one token changed where the
// model's answer after the last token changes (patching needs two answers).
std::pair<torch::Tensor, torch::Tensor> patching_pair(LoadedRun& run, const InspectData& data) {
  const torch::Tensor clean =
      data.windows[0].slice(0, 0, std::min<int64_t>(64, data.windows.size(1) - 1));
  const int64_t T = clean.size(0);
  torch::NoGradGuard no_grad;
  const auto answer = [&](const torch::Tensor& t) {
    return run.model
        ->unembed(run.model->forward_from(0, run.model->embed(t.unsqueeze(0)))[0][T - 1])
        .argmax()
        .item<int64_t>();
  };
  const int64_t clean_answer = answer(clean);
  for (int64_t position = T - 1; position >= T / 2; --position) {
    for (int64_t shift = 1; shift < 50; shift += 7) {
      torch::Tensor corrupt = clean.clone();
      corrupt[position] =
          (clean[position].item<int64_t>() + shift) % run.model->config().vocab_size;
      if (answer(corrupt) != clean_answer) return {clean, corrupt};
    }
  }
  throw std::runtime_error("no one-token change of the run's first " + std::to_string(T) +
                           " tokens changes its answer: nothing to patch");
}

}  // namespace

void bench_inspect(const BenchInspectArgs& args) {
  LoadedRun run = load_run(args.run);
  run.model->eval();
  const ModelConfig& mc = run.model->config();
  InspectArgs inspect;
  inspect.windows = args.windows;
  inspect.probes = args.probes;
  const InspectData data = inspect_data(run, args.run, inspect);
  const int64_t exact = exact_heads(args.exact);
  spdlog::info(
      "inspection of {} ({} layers x {} heads, n_embd {}, block {}, vocab {}) on {} "
      "windows and {} probes, medians of {}",
      args.run, mc.n_layer, mc.n_head, mc.n_embd, mc.block_size, mc.vocab_size, args.windows,
      args.probes, args.repeats);

  nlohmann::json doc;
  std::vector<std::pair<std::string, double>> rows;  // name, seconds
  const auto time = [&](const std::string& name, const std::function<void()>& f) {
    spdlog::info("timing {}...", name);
    rows.emplace_back(name, seconds(args.repeats, f));
  };
  time("forward over the windows and probe", [&] { inspect_windows(run, data, false, false, 0); });
  time("head scores", [&] { inspect_windows(run, data, true, false, 0); });
  time("ablation", [&] { inspect_windows(run, data, false, true, exact); });
  time("head scores + ablation", [&] { inspect_windows(run, data, true, true, exact); });
  const std::pair<torch::Tensor, torch::Tensor> prompts = patching_pair(run, data);
  const torch::Tensor& clean = prompts.first;  // named, not bound: C++17 lambdas capture these
  const torch::Tensor& corrupt = prompts.second;
  std::vector<std::pair<std::string, double>> patching;
  const auto time_patching = [&](const std::string& name, const std::function<void()>& f) {
    spdlog::info("timing {}...", name);
    patching.emplace_back(name, seconds(args.repeats, f));
  };
  const int64_t P = clean.size(0) - 1;
  time_patching("forward over the prompt", [&] {
    torch::NoGradGuard no_grad;
    run.model->forward(clean.unsqueeze(0));
  });
  time_patching("attribution patching", [&] {
    activation_patching(run.model, clean, corrupt, P, 64, token_number, ExactPatching::kNone);
  });
  time_patching("+ exact, each layer's outputs", [&] {
    activation_patching(run.model, clean, corrupt, P, 64, token_number,
                        ExactPatching::kLayerOutputs);
  });
  time_patching("+ exact, every site", [&] {
    activation_patching(run.model, clean, corrupt, P, 64, token_number, ExactPatching::kEverySite);
  });

  const std::string cpu = cpu_description();
  const auto record = [&](const std::vector<std::pair<std::string, double>>& table,
                          const std::string& key) {
    for (const auto& [name, s] : table)
      doc[key][name] = {{"seconds", s}, {"forwards", s / table.front().second}};
  };
  record(rows, "windows");
  record(patching, "patching");
  doc["peak_resident_mb"] = peak_resident_mb();
  doc["cpu"] = cpu;
  doc["threads"] = torch::get_num_threads();
  if (args.json) {
    std::printf("%s\n", doc.dump(2).c_str());
    return;
  }
  std::printf("%s, %d threads; %s: %lld x %lld heads, vocab %lld, block %lld\n", cpu.c_str(),
              torch::get_num_threads(), args.run.c_str(), static_cast<long long>(mc.n_layer),
              static_cast<long long>(mc.n_head), static_cast<long long>(mc.vocab_size),
              static_cast<long long>(mc.block_size));
  std::printf("%lld windows of %lld and %lld probes; ablation runs %s heads exactly\n",
              static_cast<long long>(args.windows), static_cast<long long>(mc.block_size),
              static_cast<long long>(args.probes), args.exact.c_str());
  const auto print = [](const std::vector<std::pair<std::string, double>>& table) {
    for (const auto& [name, s] : table)
      std::printf("  %-36s %9.3f s  %7.2f forwards\n", name.c_str(), s, s / table.front().second);
  };
  print(rows);
  std::printf("patching %lld tokens, every head, position and layer output:\n",
              static_cast<long long>(clean.size(0)));
  print(patching);
  std::printf("peak resident memory %.0f MB\n", doc["peak_resident_mb"].get<double>());
}

}  // namespace tinylm
