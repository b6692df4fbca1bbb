#include "data/io/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <string>

namespace tinylm {
namespace {

std::atomic<int64_t> fsync_nanoseconds{0};

// fsync(2), timed.
int timed_fsync(int fd) {
  const auto start = std::chrono::steady_clock::now();
  const int result = ::fsync(fd);
  fsync_nanoseconds +=
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
          .count();
  return result;
}

}  // namespace

double seconds_in_fsync() { return static_cast<double>(fsync_nanoseconds.load()) * 1e-9; }

AtomicFileWriter::AtomicFileWriter(std::filesystem::path path)
    : path_(std::move(path)), tmp_(path_.string() + ".tmp-" + std::to_string(::getpid())) {
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) fail("write");
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!tmp_.empty()) ::unlink(tmp_.c_str());
}

void AtomicFileWriter::fail(const char* what) {
  const int error = errno;
  std::string reason = std::strerror(error);
  if (error == ENOSPC || error == EFBIG || error == EDQUOT) {
    reason += "; nothing was written under this name, free some space and run again";
  }
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  ::unlink(tmp_.c_str());
  tmp_.clear();
  throw std::runtime_error(std::string("cannot ") + what + " " + path_.string() + ": " + reason);
}

void AtomicFileWriter::write_at(uint64_t offset, std::string_view bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n =
        ::pwrite(fd_, bytes.data() + done, bytes.size() - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("write");
    }
    done += static_cast<size_t>(n);
  }
  size_ = std::max<uint64_t>(size_, offset + bytes.size());
}

void AtomicFileWriter::write(std::string_view bytes) { write_at(size_, bytes); }

void AtomicFileWriter::truncate(uint64_t size) {
  if (::ftruncate(fd_, static_cast<off_t>(size)) != 0) fail("truncate");
  size_ = size;
}

void AtomicFileWriter::commit() {
  if (timed_fsync(fd_) != 0) fail("flush");
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail("close");
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) fail("rename into place");
  tmp_.clear();
  sync_directory(path_.has_parent_path() ? path_.parent_path() : ".");
}

void sync_directory(const std::filesystem::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    throw std::runtime_error("cannot open directory " + dir.string() + ": " + std::strerror(errno));
  }
  // EINVAL: a file system that has nothing to flush for directories (tmpfs, some FUSE).
  if (timed_fsync(fd) != 0 && errno != EINVAL) {
    const int error = errno;
    ::close(fd);
    throw std::runtime_error("cannot flush directory " + dir.string() + ": " +
                             std::strerror(error));
  }
  ::close(fd);
}

void write_file_atomic(const std::filesystem::path& path, std::string_view bytes) {
  AtomicFileWriter file(path);
  file.write(bytes);
  file.commit();
}

}  // namespace tinylm
