#include "train/run/checkpoint_transaction.h"

#include <unistd.h>

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "data/io/atomic_file.h"

namespace tinylm {
namespace fs = std::filesystem;
namespace {

constexpr const char* kNext = ".checkpoint-next";
constexpr const char* kCommitted = ".checkpoint-commit";
constexpr const char* kLockFile = ".checkpoint.lock";
constexpr const char* kLast = "state.json";  // installed last: it says what the others are

// Step 3: moves a committed checkpoint's files into `dir`. Idempotent, so that it can finish
// a move a killed process began. The caller holds the exclusive lock.
void install_committed(const fs::path& dir) {
  const fs::path committed = dir / kCommitted;
  if (!fs::exists(committed)) return;
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(committed)) files.push_back(entry.path());
  std::stable_partition(files.begin(), files.end(),
                        [](const fs::path& p) { return p.filename() != kLast; });
  for (const fs::path& file : files) fs::rename(file, dir / file.filename());
  sync_directory(dir);
  fs::remove_all(committed);
}

}  // namespace

CheckpointTransaction::CheckpointTransaction(fs::path dir)
    : dir_(std::move(dir)), staging_(dir_ / kNext) {
  fs::create_directories(dir_);
  {
    FileLock lock(dir_ / kLockFile);
    lock.lock(FileLock::Mode::kExclusive);
    install_committed(dir_);
  }
  fs::remove_all(staging_);  // an earlier save that never reached its commit point
  fs::create_directory(staging_);
}

CheckpointTransaction::~CheckpointTransaction() {
  if (committed_) return;
  std::error_code ignored;
  fs::remove_all(staging_, ignored);
}

void CheckpointTransaction::commit() {
  sync_directory(staging_);
  fs::rename(staging_, dir_ / kCommitted);
  sync_directory(dir_);
  committed_ = true;
  FileLock lock(dir_ / kLockFile);
  lock.lock(FileLock::Mode::kExclusive);
  install_committed(dir_);
}

CheckpointReadLock::CheckpointReadLock(const fs::path& dir) {
  if (!fs::is_directory(dir) || ::access(dir.c_str(), W_OK) != 0) return;
  lock_ = std::make_unique<FileLock>(dir / kLockFile);
  while (true) {
    lock_->lock(FileLock::Mode::kShared);
    if (!fs::exists(dir / kCommitted)) return;
    // A writer was killed between its commit point and the end of its move: finish it.
    lock_->lock(FileLock::Mode::kExclusive);
    install_committed(dir);
    lock_->unlock();
  }
}

}  // namespace tinylm
