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

namespace {

// The runs directly inside `folder`, sorted.
std::vector<fs::path> runs_in(const fs::path& folder) {
  std::vector<fs::path> found;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(folder, ec)) {
    if (e.is_directory(ec) && is_run_directory(e.path())) found.push_back(e.path());
  }
  std::sort(found.begin(), found.end());
  return found;
}

}  // namespace

ServedRuns::ServedRuns(const std::vector<fs::path>& paths) {
  const std::lock_guard<std::mutex> lock(mutex_);
  for (const fs::path& path : paths) {
    if (is_run_directory(path)) {
      add(path);
      continue;
    }
    if (!fs::is_directory(path)) {
      throw std::runtime_error(path.string() +
                               ": no such directory (serve takes run directories, "
                               "or folders of them)");
    }
    const std::vector<fs::path> found = runs_in(path);
    if (found.empty()) {
      throw std::runtime_error(path.string() +
                               " is not a run directory (no config.json and model.safetensors, "
                               "no train.lock) and holds none");
    }
    folders_.push_back(fs::absolute(path).lexically_normal());
    for (const fs::path& dir : found) add(dir);
  }
  scanned_ = std::chrono::steady_clock::now();
}

void ServedRuns::add(const fs::path& dir) {
  const fs::path absolute = fs::absolute(dir).lexically_normal();
  const fs::path named = absolute.filename().empty() ? absolute.parent_path() : absolute;
  for (const auto& r : runs_) {
    if (r->entry.dir == named) return;  // named twice, or found again by a rescan
  }
  std::string name = named.filename().string();
  // Ids are safe in a URL and a page as they are.
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') c = '_';
  }
  std::string id = name;
  for (int n = 2; run(id); ++n) id = name + "-" + std::to_string(n);
  auto r = std::make_unique<Run>();
  r->entry = {id, named};
  runs_.push_back(std::move(r));
}

void ServedRuns::scan_folders() {
  const auto t = std::chrono::steady_clock::now();
  if (folders_.empty() || t - scanned_ < rescan) return;
  scanned_ = t;
  for (const fs::path& folder : folders_) {
    for (const fs::path& dir : runs_in(folder)) {
      const size_t before = runs_.size();
      add(dir);
      if (runs_.size() > before)
        spdlog::info("serving {} ({})", runs_.back()->entry.id, dir.string());
    }
  }
}

ServedRuns::Run* ServedRuns::run(const std::string& id) const {
  for (const auto& r : runs_) {
    if (r->entry.id == id) return r.get();
  }
  return nullptr;
}

std::vector<ServedRuns::Entry> ServedRuns::runs() {
  const std::lock_guard<std::mutex> lock(mutex_);
  scan_folders();
  std::vector<Entry> out;
  for (const auto& r : runs_) out.push_back(r->entry);
  return out;
}

std::optional<ServedRuns::Entry> ServedRuns::find(const std::string& id) {
  const std::lock_guard<std::mutex> lock(mutex_);
  if (const Run* r = run(id)) return r->entry;
  scan_folders();  // a run begun since
  if (const Run* r = run(id)) return r->entry;
  return std::nullopt;
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
  Run* found = nullptr;
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    found = run(id);
  }
  if (!found) throw std::out_of_range("no run with id \"" + id + "\"");
  Run& slot = *found;
  const Entry* entry = &slot.entry;
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
