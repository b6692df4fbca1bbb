#pragma once
// Helpers shared by the tests: a temporary directory, running the tinylm binary, files,
// and max_abs_diff, the measure every equality of two paths is held to.

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

namespace tinylm::test {

namespace fs = std::filesystem;

inline fs::path source_dir() { return fs::path(TINYLM_SOURCE_DIR); }
inline fs::path binary() { return fs::path(TINYLM_BINARY); }
inline fs::path shakespeare() { return source_dir() / "data/corpora/tinyshakespeare.txt"; }
inline fs::path corpora() { return source_dir() / "data/corpora"; }
inline fs::path fixtures() { return source_dir() / "tests/fixtures"; }

// max |a - b| over all elements, computed in double.
inline double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kFloat64) - b.to(torch::kFloat64)).abs().max().item<double>();
}

class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "tinylm-test-XXXXXX").string();
    if (!::mkdtemp(pattern.data())) std::abort();
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  fs::path operator/(const std::string& name) const { return path_ / name; }

 private:
  fs::path path_;
};

// The message of the exception `f` throws; "" when it throws none.
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

inline void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

inline std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// Runs a shell command line (/bin/sh -c) and collects its stdout.
inline CommandResult run_command(const std::string& command) {
  CommandResult result;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) return result;
  std::array<char, 4096> buffer;
  size_t n;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0)
    result.output.append(buffer.data(), n);
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

using Args = std::vector<std::string>;
using Env = std::vector<std::pair<std::string, std::string>>;

// Runs `tinylm ARGS --threads 1` directly, no shell, with `env` added to the environment;
// the output has stdout, and stderr too unless `with_stderr` is false.
inline CommandResult run_tinylm(const Args& args, bool with_stderr = true, const Env& env = {}) {
  std::vector<std::string> words = {"tinylm"};
  words.insert(words.end(), args.begin(), args.end());
  words.insert(words.end(), {"--threads", "1"});
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  int out[2];
  if (::pipe(out) != 0) return {};
  const std::string path = binary().string();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(out[1], 1);
    if (with_stderr) {
      ::dup2(out[1], 2);
    } else {
      ::freopen("/dev/null", "w", stderr);
    }
    ::close(out[0]);
    ::close(out[1]);
    for (const auto& [name, value] : env) ::setenv(name.c_str(), value.c_str(), 1);
    ::execv(path.c_str(), argv.data());
    ::_exit(127);
  }
  ::close(out[1]);
  CommandResult result;
  std::array<char, 4096> buffer;
  ssize_t n;
  while ((n = ::read(out[0], buffer.data(), buffer.size())) > 0)
    result.output.append(buffer.data(), static_cast<size_t>(n));
  ::close(out[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

// `tinylm ARGS --threads 1`, its stderr read as it comes, interrupted with SIGINT once it has
// logged a line holding `cue`; then read to its end. Without the cue it is killed (no orphan
// is left) and cue_seen is false. The result has its stderr and its exit status (128 +
// the signal when one ended it); `exited`: it returned from main (a SIGINT it did not handle
// ends it by the signal, whose 128 + 2 would read as the 130 it returns itself).
struct InterruptedRun {
  bool cue_seen = false;
  bool exited = false;
  CommandResult result;
};

inline InterruptedRun interrupt_tinylm(const Args& args, const std::string& cue) {
  std::vector<std::string> words = {"tinylm"};
  words.insert(words.end(), args.begin(), args.end());
  words.insert(words.end(), {"--threads", "1"});
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  int log[2];
  if (::pipe(log) != 0) return {};
  const std::string path = binary().string();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(log[1], 2);
    ::close(log[0]);
    ::close(log[1]);
    ::execv(path.c_str(), argv.data());
    ::_exit(127);
  }
  ::close(log[1]);
  FILE* lines = ::fdopen(log[0], "r");
  InterruptedRun run;
  std::array<char, 4096> line;
  while (std::fgets(line.data(), static_cast<int>(line.size()), lines)) {
    run.result.output += line.data();
    if (std::string(line.data()).find(cue) != std::string::npos) {
      run.cue_seen = true;
      break;
    }
  }
  ::kill(pid, run.cue_seen ? SIGINT : SIGKILL);
  while (std::fgets(line.data(), static_cast<int>(line.size()), lines)) run.result.output += line.data();
  std::fclose(lines);
  int status = 0;
  ::waitpid(pid, &status, 0);
  run.exited = WIFEXITED(status);
  run.result.exit_code = run.exited ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return run;
}

// A token cache directory for this test process, removed when it ends.
inline fs::path cache_dir() {
  static const TempDir dir;
  return dir.path();
}

// A config for a run of a few seconds on `corpus`, written into `dir`; its token cache is in
// the test process's own cache_dir().
inline fs::path write_tiny_config(const fs::path& dir, const fs::path& corpus, int max_iters = 4,
                                  const std::string& data_extra = "") {
  const fs::path path = dir / "tiny.toml";
  write_text(path,
             "[model]\nn_layer = 2\nn_head = 2\nn_embd = 16\nblock_size = 16\n"
             "[data]\npath = \"" +
                 corpus.string() + "\"\ncache_dir = \"" +
                 (cache_dir() / path.parent_path().filename()).string() + "\"\n" + data_extra +
                 "[train]\nbatch_size = 4\nmax_iters = " + std::to_string(max_iters) +
                 "\nwarmup_iters = 1\nlr_decay_iters = " + std::to_string(max_iters) +
                 "\neval_interval = 2\neval_iters = 2\nlog_interval = 1\n");
  return path;
}

}  // namespace tinylm::test
