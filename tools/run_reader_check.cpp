// The rooms' link-time check (tools/CMakeLists.txt): the run directory, the foreign formats
// the inspection views and the live lab's server, each reached from here, link without the training
// library. It runs too: `tinylm_run_reader_check RUN` loads a run, writes its priors' report page
// to stdout and, on stderr, what keeps it from nanoGPT's and llama2.c's formats. (Each library is
// one unity object, so one symbol reached pulls in all of its code.)

#include <cstdio>
#include <exception>
#include <string>

#include "tools/inspect/html_report.h"
#include "tools/inspect/inspection.h"
#include "tools/inspect/inspection_json.h"
#include "tools/serve/served_runs.h"
#include "train/formats/llama2c_export.h"
#include "train/formats/nanogpt_checkpoint.h"
#include "train/run/checkpoint.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s RUN\n", argv[0]);
    return 2;
  }
  try {
    // The lab's list of runs (and so its server, one object with it) reads this one.
    tinylm::ServedRuns served({argv[1]});
    tinylm::LoadedRun run = tinylm::load_run(served.runs().at(0).dir);
    tinylm::Inspection out;
    out.run_dir = argv[1];
    out.priors = tinylm::inspect_priors(out, run);
    std::printf("%s", tinylm::html_report(tinylm::inspection_json(out, run)).c_str());
    for (const auto& reasons : {tinylm::nanogpt_incompatibilities(run.model->config()),
                                tinylm::llama2c_incompatibilities(run.model->config())}) {
      for (const std::string& reason : reasons) std::fprintf(stderr, "%s\n", reason.c_str());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
