// `tinylm inspect RUN [--prompt TEXT] [--heads] [--ablate] [--priors] [--logit-lens] [--all]
//                     [--composition] [--attribution] [--circuits] [--geometry]
//                     [--positions [--context N]] [--context-drift TOKEN] [--analogy a:b::c]
//                     [--patch --clean TEXT --corrupt TEXT [--position P]]
//                     [--training] [--ablate-heads L.H,... [--ablation zero|mean]]
//                     [--text FILE] [--windows N] [--probes N] [--seed S]
//                     [--html FILE] [--json FILE]`
// Looks inside a trained run through its hook points: attention maps of a prompt, head
// scores, ablations, priors, the logit lens, composition scores, direct logit attribution,
// activation patching, geometry, loss by position and context drift, as tables on stdout, a JSON
// document, or a self-contained HTML report (which holds every view).

#include <chrono>
#include <cstdio>

#include <spdlog/spdlog.h>

#include "data/io/atomic_file.h"
#include "tools/cli.h"
#include "tools/commands.h"
#include "tools/inspect/html_report.h"
#include "tools/inspect/inspect_request.h"
#include "tools/inspect/inspection.h"
#include "tools/inspect/inspection_json.h"
#include "tools/inspect/inspection_tables.h"

namespace tinylm {
namespace fs = std::filesystem;

namespace {

void write_outputs(const Inspection& out, const LoadedRun& run, const InspectArgs& args) {
  if (args.json != "-") {
    std::fflush(stderr);
    print_inspection(out, run);
  }
  if (!args.json.empty()) {
    const std::string text = inspection_json(out, run).dump() + "\n";
    if (args.json == "-") {
      std::fwrite(text.data(), 1, text.size(), stdout);
    } else {
      write_file_atomic(args.json, text);
      spdlog::info("wrote {} ({:.1f} MB)", args.json, static_cast<double>(text.size()) / 1e6);
    }
  }
  if (!args.html.empty()) {
    const std::string page = html_report(inspection_json(out, run, pack_heatmaps));
    write_file_atomic(args.html, page);
    spdlog::info("wrote {} ({:.1f} MB): open it in a browser", args.html,
                 static_cast<double>(page.size()) / 1e6);
  }
}

int run_inspect(const InspectArgs& args) {
  set_threads(args.threads);
  check_inspect_args(args);
  OutputFile html(args.html, "--html"), json(args.json, "--json");
  const auto start = std::chrono::steady_clock::now();
  // The analyses read activations and weights on the CPU, and the models tinylm inspects
  // are small: a CUDA device is checked, then the work stays here.
  if (!parse_device(args.device).is_cpu()) {
    spdlog::warn(
        "inspect runs on the CPU: its analyses read activations there (--device {} "
        "is not used)",
        args.device);
  }
  LoadedRun run = load_run(args.run);
  run.model->eval();
  const Inspection out = run_inspection(run, args.run, args);
  for (const std::string& note : out.notes) spdlog::info("{}", note);
  write_outputs(out, run, args);
  html.keep();
  json.keep();
  spdlog::info("inspected {} in {:.1f} s", args.run,
               std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return 0;
}

}  // namespace

Command add_inspect_command(CLI::App& app) {
  auto args = std::make_shared<InspectArgs>();
  CLI::App* cmd = app.add_subcommand(
      "inspect", "Look inside a trained run: attention, head scores, ablation, priors");
  cmd->add_option("run", args->run, "Run directory (or its best/)")->required();
  add_inspect_options(cmd, *args);
  cmd->add_option("--html", args->html, "Write the self-contained HTML report here");
  cmd->add_option("--json", args->json, "Write the JSON document here (- for stdout)");
  add_threads_flag(cmd, args->threads);
  cmd->add_option("--device", args->device, "Accepted for symmetry; the analyses run on the CPU");
  return [args] { return run_inspect(*args); };
}

}  // namespace tinylm
