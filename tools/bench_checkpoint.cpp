#include "tools/bench_checkpoint.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "data/io/atomic_file.h"
#include "data/io/checksum.h"
#include "data/io/made_directory.h"
#include "train/adamw.h"
#include "train/run/checkpoint.h"

namespace tinylm {
namespace fs = std::filesystem;

namespace {

struct Cost {
  double total = 0.0, fsync = 0.0, checksums = 0.0;  // seconds
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Medians of `repeats` calls of f, and of the fsync and checksum seconds inside each.
template <class F>
Cost measure(int repeats, F&& f) {
  std::vector<double> total, fsync, checksums;
  for (int r = 0; r < repeats; ++r) {
    const double fsync_before = seconds_in_fsync(), checksums_before = seconds_in_checksums();
    const auto start = std::chrono::steady_clock::now();
    f();
    total.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    fsync.push_back(seconds_in_fsync() - fsync_before);
    checksums.push_back(seconds_in_checksums() - checksums_before);
  }
  return {median(total), median(fsync), median(checksums)};
}

// The checkpoint's files and their bytes (the lock files are empty).
std::pair<int, uint64_t> files_in(const fs::path& dir) {
  int files = 0;
  uint64_t bytes = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.is_regular_file() && entry.file_size() > 0) {
      ++files;
      bytes += entry.file_size();
    }
  }
  return {files, bytes};
}

}  // namespace

void bench_checkpoint(const RunConfig& config, const Tokenizer& tokenizer, int repeats,
                      const fs::path& dir, bool json) {
  // Its own directory, made here and removed after: never one that holds anything else.
  const MadeDirectory made(dir, "--checkpoint-dir");
  GPT model(config.model);
  auto init = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(config.train.seed));
  model->init_weights(init);
  AdamW optimizer(model, config.train);
  TrainingState state;
  spdlog::info("checkpoints of a {:.2f}M-parameter model in {}, {} repeats",
               static_cast<double>(model->num_parameters()) / 1e6, dir.string(), repeats);
  const Cost save = measure(repeats, [&] {
    save_checkpoint(dir, config, tokenizer, model, optimizer.moments(), state);
    ++state.step;
  });
  const auto [files, bytes] = files_in(dir);
  const Cost load = measure(repeats, [&] {
    LoadedRun run = load_run(dir);
    AdamW restored(run.model, config.train);
    const TrainingState loaded = load_training_state(dir);
    const OptimizerFile moments = load_optimizer(dir, loaded.step, loaded.step);
    restored.restore(moments.tensors, moments.step, moments.path);
  });
  const double mb = static_cast<double>(bytes) / 1e6;
  if (json) {
    const auto cost = [](const Cost& c) {
      return nlohmann::json{
          {"ms", c.total * 1e3}, {"fsync_ms", c.fsync * 1e3}, {"checksum_ms", c.checksums * 1e3}};
    };
    std::printf("%s\n", nlohmann::json{{"parameters", model->num_parameters()},
                                       {"checkpoint_mb", mb},
                                       {"files", files},
                                       {"repeats", repeats},
                                       {"save", cost(save)},
                                       {"load", cost(load)}}
                            .dump(2)
                            .c_str());
    return;
  }
  std::printf("checkpoint of %.2fM parameters: %.1f MB in %d files, medians of %d\n\n",
              static_cast<double>(model->num_parameters()) / 1e6, mb, files, repeats);
  std::printf("| what | ms | fsync ms | checksum ms (share) |\n|---|---|---|---|\n");
  for (const auto& [what, c] : {std::pair{"save", save}, {"load (verified)", load}}) {
    std::printf("| %s | %.1f | %.1f | %.1f (%.1f%%) |\n", what, c.total * 1e3, c.fsync * 1e3,
                c.checksums * 1e3, 100.0 * c.checksums / c.total);
  }
}

}  // namespace tinylm
