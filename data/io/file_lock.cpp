#include "data/io/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace tinylm {
namespace {

[[noreturn]] void fail(const char* what, const std::filesystem::path& path) {
  throw std::runtime_error(std::string("cannot ") + what + " " + path.string() + ": " +
                           std::strerror(errno));
}

int operation(FileLock::Mode mode) { return mode == FileLock::Mode::kShared ? LOCK_SH : LOCK_EX; }

}  // namespace

FileLock::FileLock(std::filesystem::path path) : path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) fail("open the lock file", path_);
}

FileLock::~FileLock() { ::close(fd_); }  // closing releases the lock

void FileLock::lock(Mode mode) {
  while (::flock(fd_, operation(mode)) != 0) {
    if (errno != EINTR) fail("lock", path_);
  }
}

bool FileLock::try_lock(Mode mode) {
  while (::flock(fd_, operation(mode) | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) return false;
    if (errno != EINTR) fail("lock", path_);
  }
  return true;
}

void FileLock::unlock() { ::flock(fd_, LOCK_UN); }

std::string FileLock::read() const {
  std::string content;
  char buffer[4096];
  off_t offset = 0;
  while (true) {
    const ssize_t n = ::pread(fd_, buffer, sizeof buffer, offset);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail("read", path_);
    if (n == 0) return content;
    content.append(buffer, static_cast<size_t>(n));
    offset += n;
  }
}

void FileLock::write(std::string_view content) {
  if (::ftruncate(fd_, 0) != 0) fail("write", path_);
  size_t done = 0;
  while (done < content.size()) {
    const ssize_t n =
        ::pwrite(fd_, content.data() + done, content.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail("write", path_);
    done += static_cast<size_t>(n);
  }
}

}  // namespace tinylm
