#pragma once
// The live lab's HTTP server (`tinylm serve`, docs/SERVE.md): the page, and the CLI over
// HTTP. GET /api/inspect, /api/eval and /api/sample take their command's flags as query
// parameters of the same names, parsed by the same registration (tools/inspect/
// inspect_request.h, tools/eval_request.h, tools/sample_request.h), so an answer is what the
// command prints. /api/live streams a run's metrics and snapshots while it trains. HTTP is
// cpp-httplib's; every bad request is a 4xx with {"error", "where"} and the server goes on.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "tools/serve/served_runs.h"

namespace httplib {
class Server;
}

namespace tinylm {

// What one client may ask: each limit is named in the error that refuses it.
struct ServeLimits {
  size_t max_query_bytes = 8192;  // the request target (httplib's own URI limit is 8192)
  size_t max_body_bytes = 1024;   // the API takes no body: anything bigger is refused (413)
  size_t max_text_bytes = 4096;   // prompt, clean, corrupt, stop
  int64_t max_windows = 256;      // inspect --windows
  int64_t max_probes = 64;        // inspect --probes
  int64_t max_context = 8192;     // inspect and eval --context
  int64_t max_view_tokens = int64_t{1} << 20;  // inspect --tokens
  int64_t max_new_tokens = 2000;               // sample --max-new-tokens
  int64_t max_samples = 8;                     // sample --num-samples
  int max_streams = 16;                        // open /api/sample and /api/live streams
  int heavy_workers = 2;                       // threads that run heavy jobs
  size_t heavy_waiting = 8;                    // heavy jobs that may wait for one
};

struct ServeOptions {
  std::string host = "127.0.0.1";
  int port = 8000;  // 0: any free port
  int http_threads = 24;
  int request_threads = 1;  // LibTorch's intra-op threads per request
  // A connection idle this long (part of a request sent, or kept alive with none) is closed.
  int idle_timeout_s = 5;
  ServeLimits limits;
};

class LabServer {
 public:
  LabServer(ServedRuns& runs, ServeOptions options);
  ~LabServer();
  LabServer(const LabServer&) = delete;
  LabServer& operator=(const LabServer&) = delete;

  // Binds host:port; returns the port (the one chosen for 0). Throws std::runtime_error when
  // the address cannot be bound.
  int bind();
  // Serves until stop(); returns then.
  void listen();
  // From any thread (a signal's watcher): stops accepting, ends the streams, returns at once.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tinylm
