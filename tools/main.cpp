// tinylm: train, sample from, evaluate and inspect a tiny GPT. See README.md for the commands.

#include <malloc.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <thread>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <ATen/Parallel.h>

#include "tools/commands.h"

namespace tinylm {

void set_threads(int threads) {
  if (threads < 0) throw UsageError("--threads must be >= 1, or 0 for all cores (got " + std::to_string(threads) + ")");
  if (threads == 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  torch::set_num_threads(threads);
  // Floats below 1.2e-38 (softmax tails and their gradients reach them) take a slow path on
  // x86. Flush them to zero on this thread and on every thread of the OpenMP pool that
  // LibTorch and OpenBLAS share: measured 12% faster training steps (92.4 against 105.2
  // ms/iter, configs/shakespeare_char.toml, 2 threads), the same losses to the digits logged.
  at::globalContext().setFlushDenormal(true);
  at::parallel_for(0, threads, 1, [](int64_t, int64_t) { at::globalContext().setFlushDenormal(true); });
}

torch::Device parse_device(const std::string& text) {
  const bool cuda = text == "cuda" || text.rfind("cuda:", 0) == 0;
  if (text != "cpu" && !cuda) throw UsageError("--device must be cpu, cuda or cuda:N (got \"" + text + "\")");
  if (text == "cpu") return torch::kCPU;
  int64_t index = -1;
  if (text != "cuda") {
    const std::string digits = text.substr(5);
    if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 4) {
      throw UsageError("--device must be cpu, cuda or cuda:N (got \"" + text + "\")");
    }
    index = std::stoll(digits);
  }
  if (!at::hasCUDA()) {
    throw std::runtime_error("device " + text + ": this tinylm is built against LibTorch " TORCH_VERSION
                             " without CUDA; build it against a CUDA one, as "
                             "scripts/gpu-check.sh does, or use --device cpu");
  }
  const int64_t count = static_cast<int64_t>(torch::cuda::device_count());
  if (count == 0) throw std::runtime_error("device " + text + ": no CUDA device is visible");
  if (index >= count) {
    throw std::runtime_error("device " + text + ": there are only " + std::to_string(count) +
                             " CUDA device(s), cuda:0 to cuda:" + std::to_string(count - 1));
  }
  return index < 0 ? torch::Device(torch::kCUDA) : torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(index));
}

std::vector<HeadRef> parse_ablate_flag(const std::string& text) {
  if (text.empty()) return {};
  try {
    return parse_head_list(text);
  } catch (const std::invalid_argument& e) {
    throw UsageError(std::string("--ablate: ") + e.what());
  }
}

std::vector<HookHandle> ablate_from_flag(GPT& model, const std::vector<HeadRef>& heads) {
  if (heads.empty()) return {};
  try {
    check_heads(model->config(), heads);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(std::string("--ablate: ") + e.what());
  }
  std::string list;
  for (const HeadRef& h : heads) list += (list.empty() ? "" : ", ") + h.label();
  spdlog::info("ablating head{} {} (output zeroed at hook_z)", heads.size() > 1 ? "s" : "", list);
  return zero_ablate(model, heads);
}

std::vector<std::string> parse_overrides(const std::vector<std::string>& extras) {
  std::vector<std::string> overrides;
  for (size_t i = 0; i < extras.size(); ++i) {
    const std::string& arg = extras[i];
    if (arg.rfind("--", 0) != 0 || arg.find('.') == std::string::npos) {
      throw UsageError("unexpected argument " + arg +
                       " (config overrides look like --train.max_iters=100)");
    }
    std::string item = arg.substr(2);
    if (item.find('=') == std::string::npos) {
      if (i + 1 >= extras.size()) throw UsageError("override " + arg + " needs a value");
      item += "=" + extras[++i];
    }
    overrides.push_back(item);
  }
  return overrides;
}

RunConfig load_config_with_overrides(const std::filesystem::path& path,
                                     const std::vector<std::string>& overrides, bool resolve_paths) {
  RunConfig config = load_run_config(path);
  try {
    apply_overrides(config, overrides);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  if (resolve_paths) {
    // Paths given as overrides are relative to the working directory; keep them absolute,
    // since sample and eval read them later from elsewhere.
    for (std::string* p : {&config.data.path, &config.data.val_path, &config.data.tokenizer_model,
                           &config.data.cache_dir}) {
      std::error_code ec;
      if (!p->empty()) *p = std::filesystem::absolute(*p, ec).lexically_normal().string();
    }
  }
  return config;
}

}  // namespace tinylm

int main(int argc, char** argv) {
  // Keep freed tensor memory in the heap instead of returning it to the kernel: otherwise
  // every step's large activations are fresh mmap pages, faulted in and zeroed again
  // (measured on shakespeare_char: ~1,600 page faults per step before, ~150 after, and the
  // step 8-16% faster in an A/B on this machine).
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
  // Logs go to stderr; stdout carries only program output (samples, JSON).
  spdlog::set_default_logger(spdlog::stderr_color_mt("tinylm"));
  spdlog::set_pattern("[%H:%M:%S] %^%l%$ %v");
  CLI::App app{"tinylm: a tiny, trainable, decoder-only language model"};
  app.set_version_flag("--version", std::string("tinylm ") + TINYLM_VERSION);
  app.require_subcommand(1);
  const auto train = tinylm::add_train_command(app);
  const auto sample = tinylm::add_sample_command(app);
  const auto eval = tinylm::add_eval_command(app);
  const auto inspect = tinylm::add_inspect_command(app);
  const auto prepare = tinylm::add_prepare_command(app);
  const auto bench = tinylm::add_bench_command(app);
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
    if (app.got_subcommand("train")) return train();
    if (app.got_subcommand("sample")) return sample();
    if (app.got_subcommand("inspect")) return inspect();
    if (app.got_subcommand("prepare")) return prepare();
    if (app.got_subcommand("bench")) return bench();
    return eval();
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
