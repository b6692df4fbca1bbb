#include "tools/bench_run.h"

#include <cstdio>

#include <nlohmann/json.hpp>

#include "data/io/made_directory.h"
#include "train/trainer.h"

namespace tinylm {

void bench_run(const RunConfig& config, const std::filesystem::path& dir, bool json) {
  const MadeDirectory made(dir, "--run-dir");
  TrainOptions options;
  options.out_dir = dir;
  options.progress = false;
  const TrainResult result = train(config, options);
  const double wall = result.wall_seconds;
  const int64_t steps = result.step;
  const double steps_s = result.time.seconds(RunBreakdown::kSteps);
  const double not_steps = wall - steps_s;
  const double tokens = static_cast<double>(steps * config.train.batch_size *
                                            config.model.block_size *
                                            config.train.gradient_accumulation_steps);
  if (json) {
    nlohmann::json parts = nlohmann::json::object();
    for (const auto& [part, seconds] : result.time.parts(wall)) parts[part] = seconds;
    const nlohmann::json report = {{"steps", steps},
                                   {"wall_s", wall},
                                   {"parts_s", parts},
                                   {"not_steps_share", not_steps / wall},
                                   {"ms_per_step", 1e3 * steps_s / static_cast<double>(steps)},
                                   {"tokens_per_s", tokens / wall},
                                   {"val_loss_estimate", result.val_loss}};
    std::printf("%s\n", report.dump(2).c_str());
    return;
  }
  std::printf("the whole run: %lld steps in %.1f s wall from the process's start, %.1f ms per "
              "optimizer step, %.0f tokens/s over the wall time; val loss estimate %.4f\n\n",
              static_cast<long long>(steps), wall, 1e3 * steps_s / static_cast<double>(steps),
              tokens / wall, result.val_loss);
  std::printf("| part | s | share |\n|---|---|---|\n");
  for (const auto& [part, seconds] : result.time.parts(wall))
    std::printf("| %s | %.2f | %.1f%% |\n", part.c_str(), seconds, 100.0 * seconds / wall);
  std::printf("| all but the steps | %.2f | %.1f%% |\n", not_steps, 100.0 * not_steps / wall);
}

}  // namespace tinylm
