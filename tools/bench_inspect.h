#pragma once
// `tinylm bench --inspect RUN`: what inspection's views cost on this run, in units of one
// forward pass over the windows the view reads (units hold from machine to machine where
// seconds do not). First the forward pass over inspect's windows and probe, then head
// scores, ablation (every head estimated, --exact of them run), both together; then
// patching a prompt: one forward over it, attribution patching alone, attribution and the
// exact runs. Peak resident memory at the end. scripts/bench-inspect-gpt2.sh makes a
// GPT-2-small-shaped run with random weights and runs this on it.

#include <cstdint>
#include <string>

namespace tinylm {

struct BenchInspectArgs {
  std::string run;
  int64_t windows = 8, probes = 2;
  std::string exact = "8";  // as inspect's --exact
  int repeats = 3;
  bool json = false;
};

void bench_inspect(const BenchInspectArgs& args);

}  // namespace tinylm
