#pragma once
// `tinylm bench --serve RUN`: the live lab's speed on this machine, over loopback. A server
// in this process serves RUN; `clients` threads, each on its own keep-alive connection, ask
// what the page asks: a 64-token prompt's attention, logit lens and predictions, and the
// same with one head ablated (latency percentiles over all their requests); then one client
// streams a sample, whose tokens/s is set beside `tinylm sample`'s (the same generate(),
// in process, same options). The page's first paint is the browser test's to measure
// (tests/browser/lab_test.mjs prints it).

#include <string>

namespace tinylm {

struct BenchServeArgs {
  std::string run;
  int clients = 8;
  int requests = 200;  // per client and kind
  int max_new_tokens = 500;
  int repeats = 5;  // of the sampling figures (median)
  bool json = false;
};

void bench_serve(const BenchServeArgs& args);

}  // namespace tinylm
