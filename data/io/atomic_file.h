#pragma once
// Crash-safe file writes: the bytes go to a temporary name in the same directory, are
// flushed to disk (fsync), renamed over the target, and the directory is flushed too, so that
// the rename itself survives a power loss. A crash, a full disk or an exception mid-write
// leaves the old file whole (or no file), never a partial one under the real name.

#include <cstdint>
#include <filesystem>
#include <string_view>

namespace tinylm {

void write_file_atomic(const std::filesystem::path& path, std::string_view bytes);

// fsync of a directory: makes the renames and creations in it durable. Throws with the path.
void sync_directory(const std::filesystem::path& dir);

// Seconds this process has spent in fsync, files and directories (for tinylm bench).
double seconds_in_fsync();

// The streaming form: write() as often as needed, then commit(). Destroyed uncommitted, it
// removes its temporary file. Errors (a full disk, a file-size limit) throw and name `path`.
class AtomicFileWriter {
 public:
  explicit AtomicFileWriter(std::filesystem::path path);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  void write(std::string_view bytes);
  // Overwrites bytes already written (a header whose counts are known only at the end).
  void write_at(uint64_t offset, std::string_view bytes);
  // Cuts the file to `size` bytes and continues writing there.
  void truncate(uint64_t size);
  uint64_t size() const { return size_; }
  const std::filesystem::path& temporary_path() const { return tmp_; }
  // Flushes to disk, renames into place, and flushes the directory.
  void commit();

 private:
  [[noreturn]] void fail(const char* what);
  std::filesystem::path path_, tmp_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

}  // namespace tinylm
