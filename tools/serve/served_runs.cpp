#include "tools/serve/served_runs.h"

#include <algorithm>
#include <stdexcept>

#include <spdlog/spdlog.h>

namespace tinylm {
namespace fs = std::filesystem;

bool is_run_directory(const fs::path& dir) {
  std::error_code ec;
  // train.lock: a run `tinylm train` has begun, served from its first checkpoint on.
  return (fs::is_regular_file(dir / "config.json", ec) &&
          fs::is_regular_file(dir / "model.safetensors", ec)) ||
         fs::is_regular_file(dir / "train.lock", ec);
}

ServedRuns::ServedRuns(const std::vector<fs::path>& paths) {
  std::vector<fs::path> dirs;
  for (const fs::path& path : paths) {
    if (is_run_directory(path)) {
      dirs.push_back(path);
      continue;
    }
    if (!fs::is_directory(path)) {
      throw std::runtime_error(path.string() +
                               ": no such directory (serve takes run directories, "
                               "or folders of them)");
    }
    std::vector<fs::path> found;
    for (const fs::directory_entry& e : fs::directory_iterator(path)) {
      if (e.is_directory() && is_run_directory(e.path())) found.push_back(e.path());
    }
    if (found.empty()) {
      throw std::runtime_error(path.string() +
                               " is not a run directory (no config.json and model.safetensors, "
                               "no train.lock) and holds none");
    }
    std::sort(found.begin(), found.end());
    dirs.insert(dirs.end(), found.begin(), found.end());
  }
  for (const fs::path& dir : dirs) {
    const fs::path absolute = fs::absolute(dir).lexically_normal();
    std::string name =
        (absolute.filename().empty() ? absolute.parent_path() : absolute).filename().string();
    // Ids are safe in a URL and a page as they are.
    for (char& c : name) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') c = '_';
    }
    std::string id = name;
    for (int n = 2; find(id); ++n) id = name + "-" + std::to_string(n);
    entries_.push_back({id, absolute});
    slots_.push_back(std::make_unique<Slot>());
  }
}

const ServedRuns::Entry* ServedRuns::find(const std::string& id) const {
  for (const Entry& e : entries_) {
    if (e.id == id) return &e;
  }
  return nullptr;
}

std::optional<int64_t> ServedRuns::step_on_disk(const fs::path& dir) {
  if (!fs::is_regular_file(dir / "state.json")) return std::nullopt;
  try {
    return load_training_state(dir).step;
  } catch (const std::exception&) {
    return std::nullopt;  // being replaced right now: the next look sees it whole
  }
}

std::shared_ptr<ServedModel> ServedRuns::model(const std::string& id) {
  const Entry* entry = find(id);
  if (!entry) throw std::out_of_range("no run with id \"" + id + "\"");
  Slot& slot = *slots_[static_cast<size_t>(entry - entries_.data())];
  const std::lock_guard<std::mutex> lock(slot.mutex);
  const auto now = std::chrono::steady_clock::now();
  if (slot.model && now - slot.checked < recheck) return slot.model;
  slot.checked = now;
  const std::optional<int64_t> step = step_on_disk(entry->dir);
  if (slot.model && (!step || step == slot.model->step)) return slot.model;
  try {
    auto loaded = std::make_shared<ServedModel>(ServedModel{load_run(entry->dir), step});
    loaded->run.model->eval();
    if (slot.model) spdlog::info("{}: step {} loaded", id, step ? *step : -1);
    slot.model = std::move(loaded);
  } catch (const std::exception& e) {
    if (!slot.model) throw std::runtime_error(id + " has no checkpoint that loads: " + e.what());
    spdlog::warn("{}: keeping step {}: the checkpoint on disk did not load ({})", id,
                 slot.model->step.value_or(-1), e.what());
  }
  return slot.model;
}

}  // namespace tinylm
