#pragma once
// One training per run directory: `tinylm train` holds DIR/train.lock (an flock) for as long
// as it runs, with its pid, host and start time in the file. A second training of the same
// directory is refused, naming the holder. The kernel drops the lock when its holder dies
// however it dies, so a file that names a holder but whose lock is free is stale: it is taken
// over with a warning. On a clean exit the file is emptied (never deleted: another process
// may have it open and be waiting).

#include <filesystem>
#include <optional>
#include <string>

#include "data/io/file_lock.h"

namespace tinylm {

class TrainingLock {
 public:
  // Creates `dir` if need be. Throws (a std::runtime_error) when another training holds it.
  explicit TrainingLock(const std::filesystem::path& dir);
  ~TrainingLock();
  TrainingLock(const TrainingLock&) = delete;
  TrainingLock& operator=(const TrainingLock&) = delete;

  // The holder the file named when the lock was taken over; nullopt when it was clean.
  const std::optional<std::string>& taken_over_from() const { return stale_holder_; }

  static constexpr const char* kFileName = "train.lock";

 private:
  FileLock lock_;
  std::optional<std::string> stale_holder_;
};

// "pid 123 on host h (since 2026-12-01T10:00:00Z)", from a lock file's content.
std::string describe_holder(const std::string& content);

}  // namespace tinylm
