#include "tools/cli.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <optional>
#include <thread>

#include <ATen/Parallel.h>
#include <spdlog/spdlog.h>

namespace tinylm {
namespace fs = std::filesystem;

int cores() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

int set_threads(int threads) {
  if (threads < 0) {
    throw UsageError("--threads must be >= 1, or 0 for all cores (got " + std::to_string(threads) +
                     ")");
  }
  if (threads == 0) threads = cores();
  const char* oversubscribe = std::getenv("TINYLM_OVERSUBSCRIBE");
  if (threads > cores() && !(oversubscribe && std::string(oversubscribe) == "1")) {
    spdlog::warn(
        "--threads {} is more than the {} cores here: using {} (TINYLM_OVERSUBSCRIBE=1 "
        "runs {} anyway)",
        threads, cores(), cores(), threads);
    threads = cores();
  }
  torch::set_num_threads(threads);
  // Floats below 1.2e-38 (softmax tails and their gradients reach them) take a slow path on
  // x86. Flush them to zero on this thread and on every thread of the OpenMP pool that
  // LibTorch and OpenBLAS share: measured 12% faster training steps (docs/MEASUREMENTS.md).
  at::globalContext().setFlushDenormal(true);
  at::parallel_for(0, threads, 1,
                   [](int64_t, int64_t) { at::globalContext().setFlushDenormal(true); });
  return threads;
}

void add_threads_flag(CLI::App* cmd, int& threads, const std::string& help) {
  cmd->add_option("--threads", threads, help)->check(integer_flag(between(0, 1e6)));
}

namespace {

CLI::Validator flag_validator(Accepts accepts, bool whole) {
  const std::string kind = whole ? "a whole number" : "a finite number";
  const std::string summary = accepts.summary();
  return CLI::Validator(
      [accepts, whole](std::string& text) { return check_number_text(accepts, text, whole); },
      summary.empty() ? kind : kind + " " + summary);
}

}  // namespace

CLI::Validator integer_flag(Accepts accepts) { return flag_validator(std::move(accepts), true); }

CLI::Validator number_flag(Accepts accepts) { return flag_validator(std::move(accepts), false); }

torch::Device parse_device(const std::string& text) {
  const auto malformed = [&] {
    return UsageError("--device must be cpu, cuda or cuda:N (got \"" + text + "\")");
  };
  if (text == "cpu") return torch::kCPU;
  if (text != "cuda" && text.rfind("cuda:", 0) != 0) throw malformed();
  int64_t index = -1;
  if (text != "cuda") {
    const std::string digits = text.substr(5);
    if (digits.empty() || digits.size() > 4 ||
        digits.find_first_not_of("0123456789") != std::string::npos) {
      throw malformed();
    }
    index = std::stoll(digits);
  }
  if (!at::hasCUDA()) {
    throw std::runtime_error("device " + text +
                             ": this tinylm is built against LibTorch " TORCH_VERSION
                             " without CUDA; build it against a CUDA one, as "
                             "scripts/gpu-check.sh does, or use --device cpu");
  }
  const auto count = static_cast<int64_t>(torch::cuda::device_count());
  if (count == 0) throw std::runtime_error("device " + text + ": no CUDA device is visible");
  if (index >= count) {
    throw std::runtime_error("device " + text + ": there are only " + std::to_string(count) +
                             " CUDA device(s), cuda:0 to cuda:" + std::to_string(count - 1));
  }
  if (index < 0) return torch::Device(torch::kCUDA);
  return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(index));
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
                                     const std::vector<std::string>& overrides,
                                     bool resolve_paths) {
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

std::function<int()> with_overrides(CLI::App* cmd, std::vector<std::string>& overrides,
                                    const std::string& example, std::function<int()> run) {
  cmd->allow_extras();
  cmd->footer("Any config key can be overridden with --section.key=value, e.g. " + example + ".");
  return [cmd, &overrides, run = std::move(run)] {
    overrides = parse_overrides(cmd->remaining());
    return run();
  };
}

OutputFile::OutputFile(const std::string& path, const std::string& flag) {
  if (path.empty() || path == "-") return;
  const auto refuse = [&](const std::string& why) {
    return std::runtime_error("cannot write " + flag + " \"" + path + "\": " + why);
  };
  std::error_code ec;
  const fs::path file = fs::absolute(path, ec).lexically_normal();
  if (ec || file.filename().empty()) throw refuse("name a file, not a directory");
  if (fs::is_directory(file)) throw refuse("it is a directory");
  const fs::path dir = file.parent_path();
  if (!fs::exists(dir) && !fs::is_directory(dir.parent_path())) {
    throw refuse("its directory " + dir.string() + " does not exist, nor does " +
                 dir.parent_path().string() + " (make it first)");
  }
  if (fs::exists(dir) && !fs::is_directory(dir)) throw refuse(dir.string() + " is a file");
  made_.emplace(dir, flag);
  const fs::path probe = dir / (".tinylm-write-check-" + std::to_string(::getpid()));
  if (!std::ofstream(probe)) throw refuse(dir.string() + " is not writable");
  fs::remove(probe, ec);
}

void add_run_flags(CLI::App* cmd, RunFlags& flags, bool with_ablate) {
  cmd->add_option("run", flags.run, "Run directory (or its best/)")->required();
  if (with_ablate) {
    cmd->add_option("--ablate", flags.ablate,
                    "Zero these heads' outputs, e.g. 0.3,1.0 (LAYER.HEAD)");
  }
  add_threads_flag(cmd, flags.threads);
  cmd->add_option("--device", flags.device, "cpu, cuda or cuda:N");
}

OpenRun open_run(const RunFlags& flags) {
  set_threads(flags.threads);
  std::vector<HeadRef> heads;
  try {
    heads = flags.ablate.empty() ? std::vector<HeadRef>{} : parse_head_list(flags.ablate);
  } catch (const std::invalid_argument& e) {
    throw UsageError(std::string("--ablate: ") + e.what());
  }
  const torch::Device device = parse_device(flags.device);
  OpenRun open{load_run(flags.run), {}};
  open.run.model->to(device);
  if (heads.empty()) return open;
  try {
    check_heads(open.run.model->config(), heads);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(std::string("--ablate: ") + e.what());
  }
  std::string list;
  for (const HeadRef& h : heads) list += (list.empty() ? "" : ", ") + h.label();
  spdlog::info("ablating head{} {} (output zeroed at hook_z)", heads.size() > 1 ? "s" : "", list);
  open.ablation = zero_ablate(open.run.model, heads);
  return open;
}

}  // namespace tinylm
