#include "data/io/made_directory.h"

#include <stdexcept>
#include <system_error>

namespace tinylm {
namespace fs = std::filesystem;

void check_can_be_directory(const fs::path& dir, const std::string& what) {
  if (dir.empty()) throw std::runtime_error(what + " is empty: name a directory");
  std::error_code ec;
  for (fs::path p = fs::absolute(dir, ec); !p.empty(); p = p.parent_path()) {
    const fs::file_status status = fs::status(p, ec);
    if (fs::exists(status)) {
      if (fs::is_directory(status)) return;
      throw std::runtime_error(what + " " + dir.string() + ": " +
                               (p == fs::absolute(dir, ec)
                                    ? "it is a file, not a directory"
                                    : p.string() + " is a file, not a directory"));
    }
    if (p == p.parent_path()) break;
  }
}

MadeDirectory::MadeDirectory(const fs::path& dir, const std::string& what) {
  check_can_be_directory(dir, what);
  std::error_code ec;
  const fs::path absolute = fs::absolute(dir, ec).lexically_normal();
  fs::path top;
  for (fs::path p = absolute; !p.empty() && !fs::exists(p); p = p.parent_path()) {
    top = p;
    if (p == p.parent_path()) break;
  }
  if (top.empty()) return;
  if (!fs::create_directories(absolute, ec) && ec) {
    throw std::runtime_error("cannot make " + what + " " + dir.string() + ": " + ec.message());
  }
  top_ = top;
}

MadeDirectory::~MadeDirectory() {
  if (top_.empty()) return;
  std::error_code ec;  // a destructor must not throw; what cannot be removed stays
  fs::remove_all(top_, ec);
}

}  // namespace tinylm
