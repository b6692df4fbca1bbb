#pragma once
// A directory a command makes for what it writes, removed again if the command fails: the
// one rule for what a failed command leaves behind, which is nothing. It remembers the
// topmost directory it had to create (`runs/` too, when that was missing), and unless kept,
// its destructor removes that with everything in it. A directory that already existed is
// never removed, whatever it holds.

#include <filesystem>
#include <string>

namespace tinylm {

class MadeDirectory {
 public:
  // Creates `dir` and its missing parents. Throws std::runtime_error naming `what` (the flag
  // or setting it came from) when a part of the path is a file or cannot be created.
  MadeDirectory(const std::filesystem::path& dir, const std::string& what);
  ~MadeDirectory();
  MadeDirectory(const MadeDirectory&) = delete;
  MadeDirectory& operator=(const MadeDirectory&) = delete;

  // The command succeeded (or wrote something worth keeping): leave the directory.
  void keep() { top_.clear(); }
  // Whether this made any directory (false: `dir` was there already).
  bool made() const { return !top_.empty(); }

 private:
  std::filesystem::path top_;  // the first directory created; empty once kept or if none
};

// Throws std::runtime_error naming `what` unless `dir` could be a directory: it is one, or
// its nearest existing ancestor is a directory. Nothing is created.
void check_can_be_directory(const std::filesystem::path& dir, const std::string& what);

}  // namespace tinylm
