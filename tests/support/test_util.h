#pragma once
// Helpers shared by the tests: a temporary directory, running the tinylm binary, files,
// and max_abs_diff, the measure every equality of two paths is held to.

#include <fcntl.h>
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

#include <ATen/Parallel.h>
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

// The intra-op thread count for a scope, the one found restored after.
class ThreadCount {
 public:
  explicit ThreadCount(int threads) : before_(at::get_num_threads()) {
    at::set_num_threads(threads);
  }
  ~ThreadCount() { at::set_num_threads(before_); }

 private:
  int before_;
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

// A started `tinylm ARGS --threads 1` (no shell, `env` added to its environment): its pid
// and the read end of a pipe holding its stdout and/or stderr; what is not piped goes to
// /dev/null. pid -1 when no pipe could be made.
struct StartedTinylm {
  pid_t pid = -1;
  int output = -1;
};

inline StartedTinylm start_tinylm(const Args& args, bool pipe_stdout, bool pipe_stderr,
                                  const Env& env = {}) {
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
    const int null = ::open("/dev/null", O_WRONLY);
    ::dup2(pipe_stdout ? out[1] : null, 1);
    ::dup2(pipe_stderr ? out[1] : null, 2);
    ::close(null);
    ::close(out[0]);
    ::close(out[1]);
    for (const auto& [name, value] : env) ::setenv(name.c_str(), value.c_str(), 1);
    ::execv(path.c_str(), argv.data());
    ::_exit(127);
  }
  ::close(out[1]);
  return {pid, out[0]};
}

// Waits for a started tinylm; its exit status, or 128 + the signal that ended it.
inline int wait_exit_code(pid_t pid, bool* exited = nullptr) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (exited) *exited = WIFEXITED(status);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Runs `tinylm ARGS --threads 1` to its end; the output has stdout, and stderr too unless
// `with_stderr` is false.
inline CommandResult run_tinylm(const Args& args, bool with_stderr = true, const Env& env = {}) {
  const StartedTinylm started = start_tinylm(args, true, with_stderr, env);
  if (started.pid < 0) return {};
  CommandResult result;
  std::array<char, 4096> buffer;
  ssize_t n;
  while ((n = ::read(started.output, buffer.data(), buffer.size())) > 0)
    result.output.append(buffer.data(), static_cast<size_t>(n));
  ::close(started.output);
  result.exit_code = wait_exit_code(started.pid);
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
  const StartedTinylm started = start_tinylm(args, false, true);
  if (started.pid < 0) return {};
  const pid_t pid = started.pid;
  FILE* lines = ::fdopen(started.output, "r");
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
  while (std::fgets(line.data(), static_cast<int>(line.size()), lines))
    run.result.output += line.data();
  std::fclose(lines);
  run.result.exit_code = wait_exit_code(pid, &run.exited);
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
