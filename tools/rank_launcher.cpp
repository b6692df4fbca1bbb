#include "tools/rank_launcher.h"

#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <fstream>
#include <iterator>
#include <thread>

#include <spdlog/spdlog.h>

namespace tinylm {
namespace {

std::atomic<int> g_forward_signal{0};

extern "C" void on_launcher_signal(int signal) { g_forward_signal.store(signal); }

std::string describe_status(int status) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return fmt::format("was killed by signal {} ({})", sig, strsignal(sig));
  }
  return fmt::format("exited with status {}", WEXITSTATUS(status));
}

}  // namespace

std::vector<std::string> own_command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  for (size_t begin = 0; begin < all.size();) {
    const size_t end = all.find('\0', begin);
    args.push_back(all.substr(begin, end - begin));
    begin = end == std::string::npos ? all.size() : end + 1;
  }
  return args;
}

int launch_local_ranks(int nproc, const std::vector<std::string>& rank_args,
                       double dist_timeout_s) {
  // The job's store, on a port the kernel picks: no race for a free port, and tests can run
  // side by side.
  c10d::TCPStoreOptions options;
  options.port = 0;
  options.isServer = true;
  options.waitWorkers = false;
  options.timeout = std::chrono::milliseconds(static_cast<int64_t>(dist_timeout_s * 1000));
  const auto store = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", options);
  const int port = store->getPort();
  spdlog::info("starting {} ranks on this machine (store on 127.0.0.1:{})", nproc, port);

  std::vector<char*> argv;
  for (const std::string& arg : rank_args) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  const pid_t launcher = ::getpid();
  std::signal(SIGINT, on_launcher_signal);
  std::signal(SIGTERM, on_launcher_signal);

  std::vector<pid_t> pids;
  pid_t group = 0;  // the ranks' process group: a terminal's Ctrl-C reaches the launcher only,
                    // which forwards it once
  for (int rank = 0; rank < nproc; ++rank) {
    // torchrun's environment, made before fork: between fork and exec only async-signal-safe
    // calls are safe (the store's thread may hold the allocator's lock).
    const std::vector<std::pair<std::string, std::string>> ours{
        {"RANK", std::to_string(rank)},
        {"LOCAL_RANK", std::to_string(rank)},
        {"WORLD_SIZE", std::to_string(nproc)},
        {"LOCAL_WORLD_SIZE", std::to_string(nproc)},
        {"MASTER_ADDR", "127.0.0.1"},
        {"MASTER_PORT", std::to_string(port)},
        {"TORCHELASTIC_USE_AGENT_STORE", "True"},
        {"TORCHELASTIC_RESTART_COUNT", "0"}};
    std::vector<std::string> env;
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string entry = *e, name = entry.substr(0, entry.find('='));
      if (std::none_of(ours.begin(), ours.end(),
                       [&](const auto& kv) { return kv.first == name; })) {
        env.push_back(entry);
      }
    }
    for (const auto& [name, value] : ours) env.push_back(name + "=" + value);
    std::vector<char*> envp;
    for (std::string& entry : env) envp.push_back(entry.data());
    envp.push_back(nullptr);

    const pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error(fmt::format("cannot start rank {}: fork failed", rank));
    if (pid == 0) {
      ::setpgid(0, group);
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != launcher) ::_exit(1);  // the launcher died before the line above
      ::signal(SIGINT, SIG_DFL);
      ::signal(SIGTERM, SIG_DFL);
      ::execve("/proc/self/exe", argv.data(), envp.data());
      const char message[] = "tinylm: a rank cannot run /proc/self/exe\n";
      [[maybe_unused]] const ssize_t written = ::write(STDERR_FILENO, message, sizeof message - 1);
      ::_exit(127);
    }
    if (group == 0) group = pid;
    ::setpgid(pid, group);
    pids.push_back(pid);
  }

  using Clock = std::chrono::steady_clock;
  int running = nproc;
  bool failed = false, interrupted = false;
  auto kill_at = Clock::time_point::max();  // set at the first failure
  while (running > 0) {
    if (const int sig = g_forward_signal.exchange(0); sig != 0) {
      spdlog::warn("{}: asking every rank to checkpoint and stop", strsignal(sig));
      ::kill(-group, sig);
    }
    int status = 0;
    const pid_t pid = ::waitpid(-group, &status, WNOHANG);
    if (pid > 0) {
      const auto rank =
          static_cast<size_t>(std::find(pids.begin(), pids.end(), pid) - pids.begin());
      if (rank < pids.size()) {
        --running;
        const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
        const bool stopped = WIFEXITED(status) && WEXITSTATUS(status) == 130;
        interrupted = interrupted || stopped;
        if (!ok && !stopped) {
          spdlog::error("rank {} {}", rank, describe_status(status));
          if (!failed && running > 0) {
            kill_at = Clock::now() + std::chrono::milliseconds(
                                         static_cast<int64_t>(dist_timeout_s * 1000) + 10000);
          }
          failed = true;
        }
      }
      continue;
    }
    if (Clock::now() > kill_at) {
      spdlog::error("{} still running {:.0f} s after the first failure: killing {}",
                    running == 1 ? "1 rank is" : std::to_string(running) + " ranks are",
                    dist_timeout_s + 10, running == 1 ? "it" : "them");
      ::kill(-group, SIGKILL);
      kill_at = Clock::time_point::max();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  if (failed) return 1;
  return interrupted ? 130 : 0;
}

}  // namespace tinylm
