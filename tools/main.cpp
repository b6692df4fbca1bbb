// tinylm: train, sample from, evaluate and inspect a tiny GPT. See README.md for the commands,
// docs/DESIGN.md for the design.

#include <malloc.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <map>
#include <string>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include "tools/cli.h"
#include "tools/commands.h"

int main(int argc, char** argv) {
  // Keep freed tensor memory in the heap instead of returning it to the kernel: otherwise
  // every step's large activations are fresh mmap pages, faulted in and zeroed again (a
  // tenth of the page faults, and faster steps: docs/MEASUREMENTS.md).
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
  // Logs go to stderr; stdout carries only program output (samples, JSON).
  spdlog::set_default_logger(spdlog::stderr_color_mt("tinylm"));
  spdlog::set_pattern("[%H:%M:%S] %^%l%$ %v");
  CLI::App app{"tinylm: a tiny, trainable, decoder-only language model"};
  app.set_version_flag("--version", std::string("tinylm ") + TINYLM_VERSION);
  app.require_subcommand(1);
  const std::map<std::string, tinylm::Command> commands = {
      {"train", tinylm::add_train_command(app)},     {"sample", tinylm::add_sample_command(app)},
      {"eval", tinylm::add_eval_command(app)},       {"inspect", tinylm::add_inspect_command(app)},
      {"prepare", tinylm::add_prepare_command(app)}, {"bench", tinylm::add_bench_command(app)},
      {"keys", tinylm::add_keys_command(app)}};
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
  // A rank of a data-parallel job says which one it is.
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
