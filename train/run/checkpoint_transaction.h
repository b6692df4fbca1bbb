#pragma once
// A checkpoint is several files that must change together, so it is written as a transaction:
//   1. every file goes into DIR/.checkpoint-next/, each flushed to disk (fsync);
//   2. that directory is renamed to DIR/.checkpoint-commit/ and DIR is flushed: the commit
//      point, after which the new checkpoint is the one that counts;
//   3. under an exclusive lock on DIR/.checkpoint.lock its files are renamed into DIR,
//      state.json last, DIR is flushed, and .checkpoint-commit/ is removed.
// Readers hold the same lock shared while they read (CheckpointReadLock), so they see the old
// checkpoint or the new one, never a mix. A process killed after the commit point leaves
// .checkpoint-commit/ behind, and whoever next reads or writes DIR finishes moving its files
// (roll forward); one killed before it leaves .checkpoint-next/, which is discarded (roll
// back). Either way DIR holds one whole checkpoint: the one before the kill or the one after.

#include <filesystem>
#include <memory>

#include "data/io/file_lock.h"

namespace tinylm {

class CheckpointTransaction {
 public:
  // Starts a checkpoint of `dir` (created if need be), finishing or discarding what an
  // earlier, interrupted one left.
  explicit CheckpointTransaction(std::filesystem::path dir);
  // Not committed: the staged files are removed and `dir` is as it was.
  ~CheckpointTransaction();
  CheckpointTransaction(const CheckpointTransaction&) = delete;
  CheckpointTransaction& operator=(const CheckpointTransaction&) = delete;

  // Where the files of the new checkpoint are written.
  const std::filesystem::path& staging() const { return staging_; }
  // Steps 2 and 3 above.
  void commit();

 private:
  std::filesystem::path dir_, staging_;
  bool committed_ = false;
};

// A shared lock on a checkpoint directory, for reading it whole. Finishes an interrupted
// checkpoint first. A directory this process cannot write (nobody trains into it) is read
// without a lock.
class CheckpointReadLock {
 public:
  explicit CheckpointReadLock(const std::filesystem::path& dir);

 private:
  std::unique_ptr<FileLock> lock_;
};

}  // namespace tinylm
