#include "train/training_lock.h"

#include <unistd.h>

#include <ctime>
#include <stdexcept>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

namespace tinylm {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "unknown";
  return name;
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

fs::path lock_path(const fs::path& dir) {
  fs::create_directories(dir);
  return dir / TrainingLock::kFileName;
}

}  // namespace

std::string describe_holder(const std::string& content) {
  const json doc = json::parse(content, nullptr, /*allow_exceptions=*/false);
  const auto text = [&](const char* key) {
    return doc.is_object() && doc.contains(key) && doc[key].is_string();
  };
  if (!doc.is_object() || !doc.contains("pid") || !doc["pid"].is_number_integer() ||
      !text("host")) {
    return "an unknown process (its lock file holds \"" + content.substr(0, 80) + "\")";
  }
  return "pid " + doc["pid"].dump() + " on host " + doc["host"].get<std::string>() +
         (text("since") ? " (since " + doc["since"].get<std::string>() + ")" : "");
}

TrainingLock::TrainingLock(const fs::path& dir) : lock_(lock_path(dir)) {
  if (!lock_.try_lock(FileLock::Mode::kExclusive)) {
    throw std::runtime_error(dir.string() + " is being trained by " +
                             describe_holder(lock_.read()) +
                             ": wait for it to finish or stop it; two trainings cannot share "
                             "one run directory");
  }
  const std::string previous = lock_.read();
  if (!previous.empty()) {
    stale_holder_ = describe_holder(previous);
    spdlog::warn("{}: taking over the lock of {}, which is gone without releasing it",
                 lock_.path().string(), *stale_holder_);
  }
  lock_.write(json{{"pid", ::getpid()}, {"host", host_name()}, {"since", utc_now()}}.dump() + "\n");
}

TrainingLock::~TrainingLock() {
  try {
    lock_.write("");
  } catch (const std::exception&) {
    // The lock is released with the file anyway; a stale content only earns a warning.
  }
}

}  // namespace tinylm
