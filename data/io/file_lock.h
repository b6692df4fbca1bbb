#pragma once
// An advisory lock on a file (flock(2)), held while the object lives. The kernel releases it
// when its process dies, however it dies, so a lock can never outlive its holder: a file
// whose lock is free but whose content names a holder was left by a process that is gone.

#include <filesystem>
#include <string>
#include <string_view>

namespace tinylm {

class FileLock {
 public:
  enum class Mode { kShared, kExclusive };
  // Opens (creating it if need be) `path`. Throws, naming it, when it cannot be opened.
  explicit FileLock(std::filesystem::path path);
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

  // Waits for the lock (a shared lock waits only for exclusive holders).
  void lock(Mode mode);
  // Takes the lock if it is free now; false when another process holds it.
  bool try_lock(Mode mode);
  void unlock();

  // The file's content, and replacing it (the lock's holder describes itself).
  std::string read() const;
  void write(std::string_view content);
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  int fd_ = -1;
};

}  // namespace tinylm
