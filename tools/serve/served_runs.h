#pragma once
// The runs `tinylm serve` serves, each under an id. Paths are given once, on the command
// line: a run directory, or a folder whose sub-directories are runs. A request names a run
// by its id and nothing else, so no request reaches the file system by a path of its own.
// A run's model is loaded when first asked for and shared, read-only, by every request that
// reads it; while `tinylm train` writes the run, its next whole checkpoint (state.json's
// step moves on) replaces it for the requests that begin after. A checkpoint caught half
// written fails its checksums, and the one before is kept.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "tools/inspect/inspection_cache.h"
#include "train/run/checkpoint.h"

namespace tinylm {

// Whether `dir` holds a run: its config.json and model.safetensors, or the train.lock of a
// run `tinylm train` has just begun (its model is served once its first checkpoint is whole;
// until then a request for it is refused with 503).
bool is_run_directory(const std::filesystem::path& dir);

// A run's model as of one checkpoint.
struct ServedModel {
  LoadedRun run;
  std::optional<int64_t> step;  // state.json's; none for a run without one (an import)
  std::shared_ptr<InspectionCache> kept =
      std::make_shared<InspectionCache>();  // of this checkpoint
};

class ServedRuns {
 public:
  // Throws std::runtime_error naming a path that is neither a run nor a folder of runs.
  explicit ServedRuns(const std::vector<std::filesystem::path>& paths);

  struct Entry {
    std::string id;  // the directory's name, made unique with -2, -3, ...
    std::filesystem::path dir;
  };
  // The runs, in the order found. A folder is looked through again, at most every `rescan`,
  // so that a run begun in it after `serve` started is served too.
  std::vector<Entry> runs();
  // The run with this id (a new one in a folder is looked for first); none if unknown.
  std::optional<Entry> find(const std::string& id);

  // The run's model at its newest whole checkpoint, looked for at most every
  // `recheck` (the training run moves on). Throws std::out_of_range for an unknown id, and
  // std::runtime_error when the run has no whole checkpoint that loads.
  std::shared_ptr<ServedModel> model(const std::string& id);

  // state.json's step as it is on disk now (none without one, or while it is rewritten).
  static std::optional<int64_t> step_on_disk(const std::filesystem::path& dir);

  std::chrono::milliseconds recheck{500};
  std::chrono::milliseconds rescan{1000};

 private:
  struct Run {
    Entry entry;
    std::mutex mutex;  // of the model below
    std::shared_ptr<ServedModel> model;
    std::chrono::steady_clock::time_point checked;
  };
  void add(const std::filesystem::path& dir);  // under mutex_
  void scan_folders();                         // under mutex_
  Run* run(const std::string& id) const;       // under mutex_

  std::mutex mutex_;  // of the list
  std::vector<std::filesystem::path> folders_;
  std::vector<std::unique_ptr<Run>> runs_;  // grows only: a Run's address is stable
  std::chrono::steady_clock::time_point scanned_;
};

}  // namespace tinylm
