// `tinylm serve RUN... [--port 8000] [--host 127.0.0.1] [--threads N] [--heavy-jobs N]`
// The live lab: serves the runs (run directories, or folders of them) to the browser and
// over HTTP until Ctrl-C or SIGTERM. A run that `tinylm train` is writing is followed as it
// trains. The page, the API and its limits: docs/SERVE.md.

#include <pthread.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <thread>

#include <spdlog/spdlog.h>

#include "tools/cli.h"
#include "tools/commands.h"
#include "tools/serve/lab_server.h"

namespace tinylm {
namespace {

struct ServeArgs {
  std::vector<std::string> runs;
  ServeOptions options;
};

bool loopback(const std::string& host) {
  return host == "127.0.0.1" || host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

int run_serve(const ServeArgs& args) {
  std::vector<std::filesystem::path> paths(args.runs.begin(), args.runs.end());
  ServedRuns runs(paths);
  if (!loopback(args.options.host)) {
    spdlog::warn(
        "--host {}: the lab is reachable from other machines; it has no authentication, and "
        "anyone who reaches it can read the runs it serves and use its CPU",
        args.options.host);
  }
  // SIGINT and SIGTERM go to a watcher thread alone (blocked here, before any thread
  // starts, so every thread inherits the mask), which stops the server cleanly.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  LabServer server(runs, args.options);
  const int port = server.bind();
  std::atomic<bool> done{false};
  std::thread watcher([&] {
    const timespec tick{0, 200'000'000};
    while (!done) {
      const int signal = sigtimedwait(&stop_signals, nullptr, &tick);
      if (signal > 0) {
        spdlog::info("{}: stopping", signal == SIGINT ? "interrupted" : "terminated");
        server.stop();
        return;
      }
    }
  });
  const std::vector<ServedRuns::Entry> served = runs.runs();
  std::string ids;
  for (const ServedRuns::Entry& e : served) ids += (ids.empty() ? "" : ", ") + e.id;
  const std::string host = args.options.host.find(':') != std::string::npos
                               ? "[" + args.options.host + "]"
                               : args.options.host;
  // The URL alone on stdout, for scripts; the rest is logging.
  std::printf("http://%s:%d/\n", host.c_str(), port);
  std::fflush(stdout);
  spdlog::info("serving {} run{} ({}) at http://{}:{}/; Ctrl-C stops", served.size(),
               served.size() == 1 ? "" : "s", ids, host, port);
  server.listen();
  done = true;
  watcher.join();
  spdlog::info("stopped");
  return 0;
}

}  // namespace

Command add_serve_command(CLI::App& app) {
  auto args = std::make_shared<ServeArgs>();
  CLI::App* cmd = app.add_subcommand(
      "serve", "The live lab: look inside runs in the browser, and the CLI over HTTP");
  cmd->add_option("runs", args->runs, "Run directories, or folders of them")->required();
  ServeOptions& o = args->options;
  cmd->add_option("--port", o.port, "Port to listen on (0: any free port)")
      ->check(integer_flag(between(0, 65535)));
  cmd->add_option("--host", o.host, "Address to listen on (default 127.0.0.1: this machine only)");
  cmd->add_option("--threads", o.request_threads,
                  "Intra-op threads per request (default 1: requests run side by side)")
      ->check(integer_flag(between(1, 1024)));
  cmd->add_option("--heavy-jobs", o.limits.heavy_workers,
                  "Heavy requests (head scores, ablation sweeps, patching, eval) run at once")
      ->check(integer_flag(between(1, 64)));
  cmd->add_option("--heavy-queue", o.limits.heavy_waiting,
                  "Heavy requests that may wait for one of those; more are refused (503)")
      ->check(integer_flag(between(0, 1024)));
  cmd->add_option("--max-streams", o.limits.max_streams, "Open sample and live streams at once")
      ->check(integer_flag(between(1, 1024)));
  return [args] {
    // Streams hold an HTTP thread each; the rest serve requests.
    args->options.http_threads = args->options.limits.max_streams + 8;
    return run_serve(*args);
  };
}

}  // namespace tinylm
