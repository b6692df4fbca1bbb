// `tinylm bench [CONFIG] [--section.key=value ...] [--threads N] [--json] [--repeats R]
//               [--steps S] [--num-samples N] [--max-new-tokens M]`
// What this machine does with a config, in one run: the matmul rate LibTorch reaches here
// (the practical limit), training tokens/s and model FLOPs utilisation against that limit,
// sampling tokens/s with and without the KV cache at batch 1 and batch N, and peak memory.
// Every figure is the median of repeats after a warm-up. A table on stdout, or JSON.

#include <ATen/CPUGeneratorImpl.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "data/batches.h"
#include "model/generate.h"
#include "tools/commands.h"
#include "train/adamw.h"
#include "train/run_corpus.h"
#include "train/train_step.h"

namespace tinylm {
namespace {
using Clock = std::chrono::steady_clock;
using nlohmann::json;

// Waits for the device's queued work (CUDA runs asynchronously); nothing on the CPU.
void synchronize(const torch::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

// Median seconds of `repeats` calls of f after `warmup` unmeasured ones, on `device`.
template <class F>
double median_seconds(int warmup, int repeats, F&& f, const torch::Device& device = torch::kCPU) {
  for (int i = 0; i < warmup; ++i) f();
  synchronize(device);
  std::vector<double> times;
  for (int i = 0; i < repeats; ++i) {
    const auto start = Clock::now();
    f();
    synchronize(device);
    times.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// GFLOP/s of (m, k) @ (k, n) in `dtype`, enough calls per repeat to last ~50 ms.
double matmul_rate(int64_t m, int64_t k, int64_t n, torch::Dtype dtype, int repeats,
                   const torch::Device& device) {
  auto rng = at::make_generator<at::CPUGeneratorImpl>(1);
  const torch::Tensor a = torch::randn({m, k}, rng).to(device, dtype);
  const torch::Tensor b = torch::randn({k, n}, rng).to(device, dtype);
  const double flops = 2.0 * static_cast<double>(m * k * n);
  const double one = median_seconds(1, 1, [&] { torch::mm(a, b); }, device);
  const int calls = std::max(1, static_cast<int>(0.05 / std::max(one, 1e-6)));
  return flops * calls / median_seconds(1, repeats, [&] {
           for (int i = 0; i < calls; ++i) torch::mm(a, b);
         }, device) / 1e9;
}

double rss_mb(bool peak) {
  if (peak) {
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    return static_cast<double>(usage.ru_maxrss) / 1024.0;  // kB on Linux
  }
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  }
  return 0.0;
}

// Training FLOPs per token, nanoGPT's estimate (PaLM appendix B): 6 per weight that takes
// part in a matmul (position tables are added, not multiplied) plus 12 L C T for attention.
double flops_per_token(GPT& model) {
  const ModelConfig& c = model->config();
  double n = static_cast<double>(model->num_parameters());
  if (model->transformer->wpe) n -= static_cast<double>(model->transformer->wpe->weight.numel());
  return 6.0 * n + 12.0 * static_cast<double>(c.n_layer * c.n_embd * c.block_size);
}

}  // namespace

std::function<int()> add_bench_command(CLI::App& app) {
  struct Args {
    std::string config_path = "configs/shakespeare_char.toml";
    int threads = 0, repeats = 5, steps = 20;
    std::string device = "cpu";
    int64_t num_samples = 8, max_new_tokens = 500;
    bool json = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("bench", "Measure matmul rate, training and sampling speed, memory");
  cmd->add_option("config", args->config_path, "The config to measure (default: configs/shakespeare_char.toml)");
  cmd->add_option("--threads", args->threads, "Intra-op threads (default: all cores)");
  cmd->add_option("--device", args->device, "cpu, cuda or cuda:N: where the model and matmuls run");
  cmd->add_option("--repeats", args->repeats, "Measured repeats of each figure (median)")->check(CLI::Range(1, 1000));
  cmd->add_option("--steps", args->steps, "Training steps measured per repeat")->check(CLI::Range(1, 100000));
  cmd->add_option("--num-samples", args->num_samples, "Batch N of the batched sampling figures")->check(CLI::Range(2, 1000));
  cmd->add_option("--max-new-tokens", args->max_new_tokens, "Tokens per sample")->check(CLI::Range(1, 100000));
  cmd->add_flag("--json", args->json, "Print JSON instead of a table");
  cmd->allow_extras();
  cmd->footer("Config keys can be overridden with --section.key=value, e.g. --train.dtype=bfloat16.");

  return [args, cmd]() {
    const std::vector<std::string> overrides = parse_overrides(cmd->remaining());
    set_threads(args->threads);
    const torch::Device device = parse_device(args->device);
    const double rss_start = rss_mb(false);
    RunConfig config = load_config_with_overrides(args->config_path, overrides, true);
    RunDataOptions data_options;
    data_options.progress = false;
    const RunData data = load_run_data(config, data_options);
    config.model.vocab_size = data.tokenizer->vocab_size();
    const TrainConfig& t = config.train;
    const ModelConfig& mc = config.model;
    const int R = args->repeats;
    json out = {{"config", args->config_path}, {"threads", torch::get_num_threads()}, {"device", device.str()},
                {"repeats", R}, {"dtype", t.dtype}};

    // 1. The matmul rate: the shape of the model's widest training matmul, and 1024^3.
    spdlog::info("matmul rates...");
    const int64_t rows = t.batch_size * mc.block_size;
    json matmul = json::array();
    for (const auto& [dtype, name] : {std::pair{torch::kFloat32, "float32"}, {torch::kBFloat16, "bfloat16"}}) {
      for (const auto& shape : {std::vector<int64_t>{rows, mc.n_embd, 4 * mc.n_embd}, {1024, 1024, 1024}}) {
        matmul.push_back({{"dtype", name}, {"m", shape[0]}, {"k", shape[1]}, {"n", shape[2]},
                          {"gflops", matmul_rate(shape[0], shape[1], shape[2], dtype, R, device)}});
      }
    }
    out["matmul"] = matmul;
    // The limit for MFU: the model-shaped rate in the training dtype.
    const double limit = matmul[t.dtype == "bfloat16" ? 2 : 0]["gflops"].get<double>();

    // 2. Training: whole optimizer steps on real batches.
    spdlog::info("training ({} x {} steps)...", R, args->steps);
    GPT model(mc);
    auto init = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(t.seed));
    model->init_weights(init);
    model->to(device);
    model->train();
    AdamW optimizer(model, t);
    auto batches = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(t.seed) + 1);
    const BatchSampler sampler(data.train.tokens, mc.block_size, t.batch_size, "train");
    const BatchSource next = [&] { return sampler.sample(batches); };
    const double step_s = median_seconds(1, R, [&] {
                            for (int i = 0; i < args->steps; ++i) train_step(model, optimizer, t, t.learning_rate, next);
                          }, device) / args->steps;
    const double tokens_per_step = static_cast<double>(rows * t.gradient_accumulation_steps);
    const double model_flops = flops_per_token(model) * tokens_per_step / step_s / 1e9;
    const double batch_s = median_seconds(3, R, [&] { for (int i = 0; i < 100; ++i) next(); }) / 100;
    out["training"] = {{"ms_per_step", step_s * 1e3}, {"tokens_per_s", tokens_per_step / step_s},
                       {"model_gflops", model_flops}, {"mfu", model_flops / limit},
                       {"flops_per_token", flops_per_token(model)}, {"batch_draw_ms", batch_s * 1e3}};

    // 3. Sampling: the same model, from a one-token prompt.
    json sampling = json::array();
    for (const int64_t batch : {int64_t{1}, args->num_samples}) {
      for (const bool cache : {true, false}) {
        spdlog::info("sampling: batch {}, cache {}...", batch, cache ? "on" : "off");
        GenerationOptions g;
        g.max_new_tokens = args->max_new_tokens, g.num_samples = batch, g.use_cache = cache;
        g.sampling.temperature = 0.8, g.sampling.top_k = 200;
        auto rng = at::make_generator<at::CPUGeneratorImpl>(1);
        const double s = median_seconds(1, R, [&] { generate(model, {0}, g, rng); });
        sampling.push_back({{"batch", batch}, {"cache", cache},
                            {"tokens_per_s", static_cast<double>(batch * g.max_new_tokens) / s}});
      }
    }
    out["sampling"] = sampling;
    out["memory"] = {{"peak_rss_mb", rss_mb(true)}, {"start_rss_mb", rss_start}};

    if (args->json) {
      std::printf("%s\n", out.dump(2).c_str());
      return 0;
    }
    std::printf("tinylm bench %s: %s, %d threads, medians of %d repeats after a warm-up\n",
                args->config_path.c_str(), device.str().c_str(), torch::get_num_threads(), R);
    std::printf("model: %.2fM parameters, %s positions, %s, %s; batch %ld x %ld tokens, %s\n",
                static_cast<double>(model->num_parameters()) / 1e6, mc.pos_encoding.c_str(),
                mc.norm.c_str(), mc.mlp.c_str(), static_cast<long>(t.batch_size),
                static_cast<long>(mc.block_size), t.dtype.c_str());
    std::printf("\n| what | figure |\n|---|---|\n");
    for (const auto& m : matmul) {
      std::printf("| matmul %s %ldx%ld @ %ldx%ld | %.1f GFLOP/s |\n", m["dtype"].get<std::string>().c_str(),
                  m["m"].get<long>(), m["k"].get<long>(), m["k"].get<long>(), m["n"].get<long>(),
                  m["gflops"].get<double>());
    }
    const json& tr = out["training"];
    std::printf("| training step (%s) | %.1f ms, %.0f tokens/s |\n", t.dtype.c_str(),
                tr["ms_per_step"].get<double>(), tr["tokens_per_s"].get<double>());
    std::printf("| training model FLOPs | %.1f GFLOP/s = MFU %.0f%% of the %s matmul rate |\n",
                model_flops, 100.0 * model_flops / limit, t.dtype.c_str());
    std::printf("| drawing one batch | %.3f ms |\n", tr["batch_draw_ms"].get<double>());
    for (const auto& s : sampling) {
      std::printf("| sampling, batch %ld, KV cache %s | %.0f tokens/s |\n", s["batch"].get<long>(),
                  s["cache"].get<bool>() ? "on" : "off", s["tokens_per_s"].get<double>());
    }
    std::printf("| peak memory (RSS) | %.0f MB (%.0f MB at start) |\n", rss_mb(true), rss_start);
    return 0;
  };
}

}  // namespace tinylm
