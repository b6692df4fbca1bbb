// tinylm: train, sample from, evaluate and inspect a tiny GPT. See README.md for the commands,
// docs/DESIGN.md for the design.

#include <malloc.h>
#include <csignal>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <map>
#include <string>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include "tools/cli.h"
#include "tools/commands.h"

namespace {

using Commands = std::map<std::string, tinylm::Command>;

// A word where the subcommand goes that is none of them: say so, and which there are.
bool refused_unknown_subcommand(int argc, char** argv, CLI::App& app, const Commands& commands) {
  if (argc < 2 || argv[1][0] == '-' || commands.count(argv[1]) != 0) return false;
  std::string names;
  for (const CLI::App* sub : app.get_subcommands({})) {
    names += (names.empty() ? "" : ", ") + sub->get_name();
  }
  std::fprintf(stderr,
               "tinylm: unknown subcommand \"%s\"; the subcommands are %s\n"
               "Run `tinylm --help` for usage.\n",
               argv[1], names.c_str());
  return true;
}

// Runs the subcommand the command line chose; errors become the exit status: 2 for usage,
// 1 for everything else. A rank of a data-parallel job says which one it is.
int run_chosen(CLI::App& app, const Commands& commands) {
  const char* rank = std::getenv("RANK");
  const char* world = std::getenv("WORLD_SIZE");
  const std::string who =
      rank && world && std::string(world) != "1" ? std::string("tinylm: rank ") + rank : "tinylm";
  try {
    const std::vector<CLI::App*> chosen = app.get_subcommands();
    const auto it = chosen.size() == 1 ? commands.find(chosen[0]->get_name()) : commands.end();
    if (it == commands.end()) throw tinylm::UsageError("choose one subcommand");
    return it->second();
  } catch (const tinylm::UsageError& e) {
    std::fprintf(stderr, "%s: %s\nRun `tinylm --help` for usage.\n", who.c_str(), e.what());
    return 2;
  } catch (const c10::Error& e) {
    std::fprintf(stderr, "%s: error: %s\n", who.c_str(), e.what_without_backtrace());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", who.c_str(), e.what());
    return 1;
  }
}

// Ends the process with `code` without running the static destructors: LibTorch's unregister
// each of its operators, 30-90 ms of a command (docs/MEASUREMENTS.md, round seventeen), and by
// now the command has closed all it opened. The logs and stdout are flushed first. A sanitizer
// build exits normally, so that LeakSanitizer still checks at exit.
int exit_now(int code) {
#ifdef TINYLM_SANITIZE
  return code;
#else
  spdlog::default_logger()->flush();
  std::cout.flush();
  std::fflush(nullptr);
  std::_Exit(code);
#endif
}

int run(int argc, char** argv) {
  // Keep freed tensor memory in the heap instead of returning it to the kernel: otherwise
  // every step's large activations are fresh mmap pages, faulted in and zeroed again (a
  // tenth of the page faults, and faster steps: docs/MEASUREMENTS.md).
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
  // A file-size limit (ulimit -f) then fails the write that passes it (EFBIG), which names
  // the file and leaves the previous checkpoint whole, instead of killing the process.
  std::signal(SIGXFSZ, SIG_IGN);
  // Logs go to stderr; stdout carries only program output (samples, JSON).
  spdlog::set_default_logger(spdlog::stderr_color_mt("tinylm"));
  spdlog::set_pattern("[%H:%M:%S] %^%l%$ %v");
  CLI::App app{"tinylm: a tiny, trainable, decoder-only language model"};
  app.set_version_flag("--version", std::string("tinylm ") + TINYLM_VERSION);
  app.require_subcommand(1);
  const Commands commands = {
      {"train", tinylm::add_train_command(app)},      {"sample", tinylm::add_sample_command(app)},
      {"eval", tinylm::add_eval_command(app)},        {"inspect", tinylm::add_inspect_command(app)},
      {"prepare", tinylm::add_prepare_command(app)},  {"bench", tinylm::add_bench_command(app)},
      {"import", tinylm::add_import_command(app)},    {"export", tinylm::add_export_command(app)},
      {"keys", tinylm::add_keys_command(app)},        {"serve", tinylm::add_serve_command(app)},
      {"features", tinylm::add_features_command(app)}};
  if (refused_unknown_subcommand(argc, argv, app, commands)) return 2;
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "tinylm: %s\nRun `tinylm --help` for usage.\n", e.what());
    return 2;
  }
  return run_chosen(app, commands);
}

}  // namespace

int main(int argc, char** argv) { return exit_now(run(argc, argv)); }
