// `tinylm bench [CONFIG] [--section.key=value ...] [--threads N] [--json] [--repeats R]
//               [--steps S] [--num-samples N] [--max-new-tokens M] [--checkpoint] [--run]`
// `tinylm bench --run [CONFIG]`: the whole recipe trained once, and where its time went
// (tools/bench_run.h)
// `tinylm bench --serve RUN [--clients C] [--requests N]`: the live lab (tools/bench_serve.h)
// What this machine does with a config, in one run: the matmul rate LibTorch reaches here
// (the practical limit), training tokens/s and model FLOPs utilisation against that limit,
// sampling tokens/s with and without the KV cache at batch 1 and batch N, and peak memory.
// Every figure is the median of repeats after a warm-up. A table on stdout, or JSON.

#include <ATen/CPUGeneratorImpl.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <tuple>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "data/batches.h"
#include "model/generate.h"
#include "model/kernels/kernel_choice.h"
#include "model/ops/blas_matmul.h"
#include "model/ops/onednn_matmul.h"
#include "tools/bench_checkpoint.h"
#include "tools/bench_inspect.h"
#include "tools/bench_run.h"
#include "tools/bench_serve.h"
#include "tools/cli.h"
#include "tools/commands.h"
#include "tools/inspect/inspect_request.h"
#include "train/adamw.h"
#include "train/blas_core.h"
#include "train/precision.h"
#include "train/run/run_corpus.h"
#include "train/step_profile.h"
#include "train/train_step.h"

namespace tinylm {
namespace {

namespace fs = std::filesystem;
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

// GFLOP/s of (m, k) @ (k, n) in `dtype`, enough calls per repeat to last ~50 ms. On the CPU,
// the fastest of LibTorch's mm and the libraries the linears call directly in this dtype
// (model/fused_linear.h): oneDNN where it runs bfloat16 or beats the BLAS in float32, and the
// BLAS in float32: the rate MFU divides by is the best this machine showed.
double matmul_rate(int64_t m, int64_t k, int64_t n, torch::Dtype dtype, int repeats,
                   const torch::Device& device) {
  auto rng = at::make_generator<at::CPUGeneratorImpl>(1);
  const torch::Tensor a = torch::randn({m, k}, rng).to(device, dtype);
  const torch::Tensor b = torch::randn({k, n}, rng).to(device, dtype);
  const double flops = 2.0 * static_cast<double>(m * k * n);
  const auto rate = [&](const std::function<void()>& product) {
    const double one = median_seconds(1, 1, product, device);
    const int calls = std::max(1, static_cast<int>(0.05 / std::max(one, 1e-6)));
    return flops * calls /
           median_seconds(
               1, repeats,
               [&] {
                 for (int i = 0; i < calls; ++i) product();
               },
               device) /
           1e9;
  };
  double best = rate([&] { torch::mm(a, b); });
  const bool onednn = (dtype == torch::kBFloat16 && onednn_bfloat16_runs()) ||
                      (dtype == torch::kFloat32 && onednn_float32_beats_blas());
  torch::Tensor out = torch::empty({m, n}, a.options());
  if (device.is_cpu() && onednn) best = std::max(best, rate([&] { onednn_matmul(a, b, {}, out); }));
  if (device.is_cpu() && dtype == torch::kFloat32)
    best = std::max(best, rate([&] { blas_matmul(a, b, {}, out); }));
  return best;
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

struct BenchArgs {
  std::string config_path;  // empty: the bundled recipe (bundled_config)
  int threads = 0, repeats = 5, steps = 20;
  std::string device = "cpu";
  int64_t num_samples = 8, max_new_tokens = 500;
  bool json = false;
  bool checkpoint = false;                               // --checkpoint: only that
  std::string checkpoint_dir = "runs/bench-checkpoint";  // on the disk runs are written to
  bool run = false;                                      // --run: only that
  std::string run_dir = "runs/bench-run";
  std::vector<std::string> overrides;  // --section.key=value
  std::string serve;                   // --serve RUN: only the lab
  std::string inspect;                 // --inspect RUN: only inspection
  int64_t windows = 8, probes = 2;     // of --inspect
  std::string exact = "8";
  int clients = 8, requests = 200;  // of --serve
};

struct MatmulRate {
  std::string dtype;
  int64_t m, k, n;
  double gflops;
};

// MFU, defined once: the model's FLOPs per second in training (6 N per token plus attention,
// flops_per_token) over a measured matmul rate of this machine. Which rate is the divisor
// is said with every figure, because it moves the figure by 2x: the rate of the model's own
// widest matmul shape in the training dtype (`mfu`), the big-GEMM rate, 1024^3 in that dtype
// (`mfu_gemm`: small shapes run slower, so the first hides how far a step is from the
// machine's peak), and the fastest of all four rates measured (`mfu_fastest`).
struct Mfu {
  double fraction = 0.0;
  std::string rate;  // "float32 3072x128 @ 128x512, 95.1 GFLOP/s"
  double gflops = 0.0;
};

struct TrainingSpeed {
  double ms_per_step = 0.0, tokens_per_s = 0.0, model_gflops = 0.0;
  Mfu mfu, mfu_gemm, mfu_fastest;
  // Muon's Newton-Schulz per step (newton_schulz_flops, nominal; 0 without Muon): the
  // optimizer's matmuls, which MFU leaves out, and the model's FLOPs with them per second.
  double newton_schulz_gflop_per_step = 0.0, step_gflops = 0.0;
  double operators_ms_per_step = 0.0;  // the same steps without the fused kernels
  int replicas = 1;                    // thread replicas the steps used (train/thread_replicas.h)
  double split_ms_per_step = 0.0;      // with replicas: the steps through one model instead
  double flops_per_token = 0.0, batch_draw_ms = 0.0;
  StepProfile profile;  // where a step's time goes
};

struct SamplingSpeed {
  int64_t batch;
  bool cache;
  double tokens_per_s;
};

struct BenchReport {
  std::vector<MatmulRate> matmul;
  TrainingSpeed training{};
  std::vector<SamplingSpeed> sampling;
  double start_rss_mb = 0.0, peak_rss_mb = 0.0;
};

// The model's widest training matmul, (B T, C) @ (C, 4C), and 1024^3, in float32 and bfloat16
// (bfloat16 only where a bfloat16 matmul can be made: train/precision.h).
std::vector<MatmulRate> measure_matmul(const RunConfig& config, int repeats,
                                       const torch::Device& device) {
  spdlog::info("matmul rates...");
  const int64_t rows = config.train.batch_size * config.model.block_size, C = config.model.n_embd;
  std::vector<MatmulRate> rates;
  for (const auto& [dtype, name] :
       {std::pair{torch::kFloat32, "float32"}, {torch::kBFloat16, "bfloat16"}}) {
    if (dtype == torch::kBFloat16 && device.is_cpu()) {
      if (const auto why = bfloat16_matmul_refusal()) {
        spdlog::info("no bfloat16 rates: no bfloat16 matmul can be made here ({})", *why);
        continue;
      }
    }
    for (const auto& shape : {std::vector<int64_t>{rows, C, 4 * C}, {1024, 1024, 1024}}) {
      rates.push_back({name, shape[0], shape[1], shape[2],
                       matmul_rate(shape[0], shape[1], shape[2], dtype, repeats, device)});
    }
  }
  return rates;
}

// Steps run unmeasured each time the training A/B switches to a variant.
constexpr int kSettlingSteps = 2;

// Whole optimizer steps on real batches.
TrainingSpeed measure_training(GPT& model, const RunConfig& config, const RunData& data,
                               const BenchArgs& args, const torch::Device& device) {
  const TrainConfig& t = config.train;
  const int64_t T = config.model.block_size;
  spdlog::info("training ({} x {} steps)...", args.repeats, args.steps);
  model->train();
  AdamW optimizer(model, t);
  std::optional<ThreadReplicas> replicas;  // as train takes them
  if (const int count = thread_replica_count(model, t); count > 1)
    replicas.emplace(model, optimizer, count);
  auto batches = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(t.seed) + 1);
  const BatchSampler sampler(data.train.tokens, T, t.batch_size, "train");
  const BatchSource next = [&] { return sampler.sample(batches); };
  ThreadReplicas* const with_replicas = replicas ? &*replicas : nullptr;
  const auto step = [&](ThreadReplicas* r) {
    train_step(model, optimizer, t, t.learning_rate, next, nullptr, false, r);
  };
  // The fused kernels and the operator path (model/kernels/kernel_choice.h), and with thread
  // replicas the steps through one model, operators split over the threads: repeats
  // alternating so that all see the same machine, the A/Bs in one sitting.
  struct Variant {
    Kernels kernels;
    ThreadReplicas* replicas;
    std::vector<double> seconds;
  };
  std::vector<Variant> variants{{Kernels::kFused, with_replicas, {}},
                                {Kernels::kOperators, with_replicas, {}}};
  if (replicas) variants.push_back({Kernels::kFused, nullptr, {}});
  for (int r = 0; r < args.repeats; ++r) {
    for (Variant& v : variants) {
      const ScopedKernelChoice scoped(v.kernels);
      // The first step after a switch of variant ran 1-8 ms over the steady 10 (the other
      // variant's tensors and primitives had filled the caches): unmeasured steps first, so
      // that each figure is the steady state a training run sees.
      for (int i = 0; i < kSettlingSteps; ++i) step(v.replicas);
      const double s = median_seconds(
          r == 0 ? 1 : 0, 1,
          [&] {
            for (int i = 0; i < args.steps; ++i) step(v.replicas);
          },
          device);
      v.seconds.push_back(s / args.steps);
    }
  }
  const std::vector<double>&fused_s = variants[0].seconds, &operators_s = variants[1].seconds;
  const auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  const double step_s = median(fused_s);
  const double tokens_per_step =
      static_cast<double>(t.batch_size * T * t.gradient_accumulation_steps);
  const double model_gflops = flops_per_token(model) * tokens_per_step / step_s / 1e9;
  const double batch_s = median_seconds(3, args.repeats,
                                        [&] {
                                          for (int i = 0; i < 100; ++i) next();
                                        }) /
                         100;
  TrainingSpeed speed;
  speed.ms_per_step = step_s * 1e3;
  speed.operators_ms_per_step = median(operators_s) * 1e3;
  speed.replicas = replicas ? replicas->count() : 1;
  if (replicas) speed.split_ms_per_step = median(variants[2].seconds) * 1e3;
  speed.tokens_per_s = tokens_per_step / step_s;
  speed.model_gflops = model_gflops;
  speed.newton_schulz_gflop_per_step = optimizer.newton_schulz_flops() / 1e9;
  speed.step_gflops = model_gflops + speed.newton_schulz_gflop_per_step / step_s;
  speed.flops_per_token = flops_per_token(model);
  speed.batch_draw_ms = batch_s * 1e3;
  // The profile times operators on the CPU; a device's kernels run asynchronously to them.
  if (device.is_cpu()) {
    spdlog::info("profiling {} steps...", std::min(args.steps, 10));
    speed.profile = profile_steps([&] { step(with_replicas); }, std::min(args.steps, 10));
  }
  return speed;
}

// From a one-token prompt, at batch 1 and batch N, with and without the KV cache.
std::vector<SamplingSpeed> measure_sampling(GPT& model, const RunConfig& config,
                                            const BenchArgs& args) {
  std::vector<SamplingSpeed> speeds;
  for (const int64_t batch : {int64_t{1}, args.num_samples}) {
    for (const bool cache : {true, false}) {
      spdlog::info("sampling: batch {}, cache {}...", batch, cache ? "on" : "off");
      GenerationOptions g;
      g.max_new_tokens = args.max_new_tokens;
      g.num_samples = batch;
      g.use_cache = cache;
      g.sampling = config.sample.sampling();
      auto rng = at::make_generator<at::CPUGeneratorImpl>(1);
      const double s = median_seconds(1, args.repeats, [&] { generate(model, {0}, g, rng); });
      speeds.push_back({batch, cache, static_cast<double>(batch * g.max_new_tokens) / s});
    }
  }
  return speeds;
}

json profile_json(const StepProfile& p) {
  json categories = json::object(), ops = json::array();
  for (const auto& [name, ms] : p.categories) categories[name] = ms;
  for (const ProfiledOp& op : p.ops) {
    ops.push_back(
        {{"name", op.name}, {"category", op.category}, {"ms", op.ms}, {"calls", op.calls}});
  }
  return {{"ms_per_step", p.total_ms},
          {"wall_ms_per_step", p.wall_ms},
          {"categories", categories},
          {"ops", ops}};
}

// The profile as two tables: the categories, and the operators that cost most.
void print_profile(const StepProfile& p) {
  std::printf(
      "\nwhere a training step's time goes: the self time of LibTorch's operators under its "
      "profiler, summed over the threads that ran them: %.1f ms in %.1f ms wall per "
      "step\n\n| category | ms/step | share |\n"
      "|---|---|---|\n",
      p.total_ms, p.wall_ms);
  for (const auto& [name, ms] : p.categories) {
    std::printf("| %s | %.2f | %.0f%% |\n", name.c_str(), ms,
                100.0 * ms / std::max(p.total_ms, 1e-9));
  }
  std::printf("\n| operator | category | ms/step | calls/step |\n|---|---|---|---|\n");
  for (size_t i = 0; i < std::min<size_t>(p.ops.size(), 12); ++i) {
    const ProfiledOp& op = p.ops[i];
    std::printf("| %s | %s | %.2f | %lld |\n", op.name.c_str(), op.category.c_str(), op.ms,
                static_cast<long long>(op.calls));
  }
}

json report_json(const BenchReport& r, const BenchArgs& args, const RunConfig& config,
                 const torch::Device& device) {
  json matmul = json::array(), sampling = json::array();
  for (const MatmulRate& m : r.matmul) {
    matmul.push_back(
        {{"dtype", m.dtype}, {"m", m.m}, {"k", m.k}, {"n", m.n}, {"gflops", m.gflops}});
  }
  for (const SamplingSpeed& s : r.sampling) {
    sampling.push_back({{"batch", s.batch}, {"cache", s.cache}, {"tokens_per_s", s.tokens_per_s}});
  }
  const TrainingSpeed& t = r.training;
  return {{"config", args.config_path},
          {"cpu", cpu_description()},
          {"malloc", malloc_library()},
          {"blas", blas_core_description()},
          {"threads", torch::get_num_threads()},
          {"device", device.str()},
          {"repeats", args.repeats},
          {"dtype", name_of(config.train.dtype)},
          {"matmul", matmul},
          {"training",
           {{"ms_per_step", t.ms_per_step},
            {"operators_ms_per_step", t.operators_ms_per_step},
            {"thread_replicas", t.replicas},
            {"split_ms_per_step", t.split_ms_per_step},
            {"tokens_per_s", t.tokens_per_s},
            {"model_gflops", t.model_gflops},
            {"mfu", t.mfu.fraction},
            {"mfu_rate", t.mfu.rate},
            {"mfu_gemm", t.mfu_gemm.fraction},
            {"mfu_gemm_rate", t.mfu_gemm.rate},
            {"mfu_fastest", t.mfu_fastest.fraction},
            {"mfu_fastest_rate", t.mfu_fastest.rate},
            {"newton_schulz_gflop_per_step", t.newton_schulz_gflop_per_step},
            {"step_gflops", t.step_gflops},
            {"flops_per_token", t.flops_per_token},
            {"batch_draw_ms", t.batch_draw_ms},
            {"profile", profile_json(t.profile)}}},
          {"sampling", sampling},
          {"memory", {{"peak_rss_mb", r.peak_rss_mb}, {"start_rss_mb", r.start_rss_mb}}}};
}

void print_report(const BenchReport& r, const BenchArgs& args, const RunConfig& config, GPT& model,
                  const torch::Device& device) {
  const ModelConfig& mc = config.model;
  const char* dtype = name_of(config.train.dtype);
  std::printf("tinylm bench %s: %s, %d threads, medians of %d repeats after a warm-up\n",
              args.config_path.c_str(), device.str().c_str(), torch::get_num_threads(),
              args.repeats);
  std::printf("machine: %s; malloc from %s; %s\n", cpu_description().c_str(),
              malloc_library().c_str(), blas_core_description().c_str());
  std::printf("model: %.2fM parameters, %s positions, %s, %s; batch %ld x %ld tokens, %s",
              static_cast<double>(model->num_parameters()) / 1e6, name_of(mc.pos_encoding),
              name_of(mc.norm), name_of(mc.mlp), static_cast<long>(config.train.batch_size),
              static_cast<long>(mc.block_size), dtype);
  if (r.training.replicas > 1)
    std::printf("; the batch's rows split over %d thread replicas", r.training.replicas);
  std::printf("\n");
  std::printf("\n| what | figure |\n|---|---|\n");
  for (const MatmulRate& m : r.matmul) {
    std::printf("| matmul %s %ldx%ld @ %ldx%ld | %.1f GFLOP/s |\n", m.dtype.c_str(),
                static_cast<long>(m.m), static_cast<long>(m.k), static_cast<long>(m.k),
                static_cast<long>(m.n), m.gflops);
  }
  const TrainingSpeed& t = r.training;
  std::printf("| training step (%s) | %.1f ms, %.0f tokens/s |\n", dtype, t.ms_per_step,
              t.tokens_per_s);
  std::printf(
      "| training step (%s), operator path, no fused kernels | %.1f ms: fused/operators "
      "= %.2f |\n",
      dtype, t.operators_ms_per_step, t.ms_per_step / t.operators_ms_per_step);
  if (t.replicas > 1) {
    std::printf(
        "| training step (%s), one model, operators split over the threads, no replicas | %.1f "
        "ms: replicas/split = %.2f |\n",
        dtype, t.split_ms_per_step, t.ms_per_step / t.split_ms_per_step);
  }
  std::printf("| training model FLOPs | %.1f GFLOP/s |\n", t.model_gflops);
  for (const auto& [what, m] : {std::pair{"model-shaped matmul rate", &t.mfu},
                                {"big-GEMM rate", &t.mfu_gemm},
                                {"fastest rate measured", &t.mfu_fastest}}) {
    std::printf("| MFU over the %s (%s) | %.0f%% |\n", what, m->rate.c_str(), 100.0 * m->fraction);
  }
  if (t.newton_schulz_gflop_per_step > 0) {
    std::printf(
        "| the model's and Newton-Schulz's FLOPs (%.2f GFLOP a step, nominal) over the "
        "model-shaped rate | %.1f GFLOP/s: %.0f%% |\n",
        t.newton_schulz_gflop_per_step, t.step_gflops, 100.0 * t.step_gflops / t.mfu.gflops);
  }
  std::printf("| drawing one batch | %.3f ms |\n", t.batch_draw_ms);
  for (const SamplingSpeed& s : r.sampling) {
    std::printf("| sampling, batch %ld, KV cache %s | %.0f tokens/s |\n",
                static_cast<long>(s.batch), s.cache ? "on" : "off", s.tokens_per_s);
  }
  std::printf("| peak memory (RSS) | %.0f MB (%.0f MB at start) |\n", r.peak_rss_mb,
              r.start_rss_mb);
  if (!t.profile.categories.empty()) print_profile(t.profile);
}

// configs/shakespeare_char.toml of the source tree the binary was built in (build/tinylm ->
// configs/), wherever bench is run from.
std::string bundled_config() {
  const fs::path binary = fs::read_symlink("/proc/self/exe");
  for (const fs::path& root : {binary.parent_path().parent_path(), binary.parent_path()}) {
    const fs::path config = root / "configs" / "shakespeare_char.toml";
    if (fs::exists(config)) return config.string();
  }
  throw UsageError("no CONFIG given, and no configs/shakespeare_char.toml beside " +
                   binary.string() + ": pass the config to measure");
}

int run_bench(BenchArgs args) {
  set_threads(args.threads);
  if (!args.serve.empty()) {
    // Requests run one intra-op thread each, as `serve` runs them; --threads is theirs.
    bench_serve({args.serve, args.clients, args.requests, static_cast<int>(args.max_new_tokens),
                 args.repeats, args.json});
    return 0;
  }
  if (!args.inspect.empty()) {
    bench_inspect({args.inspect, args.windows, args.probes, args.exact, args.repeats, args.json});
    return 0;
  }
  const torch::Device device = parse_device(args.device);
  // bench removes what --checkpoint and --run write: only a directory it makes itself.
  for (const auto& [on, flag, dir] :
       {std::tuple{args.checkpoint, "--checkpoint-dir", args.checkpoint_dir},
        std::tuple{args.run, "--run-dir", args.run_dir}}) {
    if (on && fs::exists(fs::symlink_status(dir))) {
      throw UsageError(std::string(flag) + ": " + dir +
                       " exists; bench writes into a new directory and removes it after, so "
                       "name one that does not exist yet");
    }
  }
  if (args.checkpoint && args.run) throw UsageError("--checkpoint and --run: choose one");
  BenchReport report;
  report.start_rss_mb = rss_mb(false);
  if (args.config_path.empty()) args.config_path = bundled_config();
  RunConfig config = load_config_with_overrides(args.config_path, args.overrides, true);
  if (args.run) {
    bench_run(config, args.run_dir, args.json);
    return 0;
  }
  RunDataOptions data_options;
  data_options.progress = false;
  const RunData data = load_run_data(config, data_options);
  config.model.vocab_size = data.tokenizer->vocab_size();
  if (args.checkpoint) {
    bench_checkpoint(config, *data.tokenizer, args.repeats, args.checkpoint_dir, args.json);
    return 0;
  }
  // The precision training would choose here (train.dtype = "auto" by default).
  const PrecisionChoice precision = choose_precision(config.train.dtype, device, cpu_flags());
  config.train.dtype = precision.dtype;
  spdlog::info("precision: {} matmuls ({})", name_of(precision.dtype), precision.reason);
  report.matmul = measure_matmul(config, args.repeats, device);
  GPT model(config.model);  // freshly initialised: speed does not depend on the weights
  auto init = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(config.train.seed));
  model->init_weights(init);
  model->to(device);
  report.training = measure_training(model, config, data, args, device);
  // The three divisors of MFU (TrainingSpeed says why three). measure_matmul's order: per
  // dtype (float32, bfloat16), the model's shape, then 1024^3.
  const size_t own = config.train.dtype == Dtype::kBfloat16 ? 2 : 0;
  const auto fastest = std::max_element(
      report.matmul.begin(), report.matmul.end(),
      [](const MatmulRate& a, const MatmulRate& b) { return a.gflops < b.gflops; });
  const auto mfu_over = [&](const MatmulRate& m) {
    return Mfu{
        report.training.model_gflops / m.gflops,
        fmt::format("{} {}x{} @ {}x{}, {:.1f} GFLOP/s", m.dtype, m.m, m.k, m.k, m.n, m.gflops),
        m.gflops};
  };
  report.training.mfu = mfu_over(report.matmul[own]);
  report.training.mfu_gemm = mfu_over(report.matmul[own + 1]);
  report.training.mfu_fastest = mfu_over(*fastest);
  report.sampling = measure_sampling(model, config, args);
  report.peak_rss_mb = rss_mb(true);
  if (args.json) {
    std::printf("%s\n", report_json(report, args, config, device).dump(2).c_str());
  } else {
    print_report(report, args, config, model, device);
  }
  return 0;
}

}  // namespace

Command add_bench_command(CLI::App& app) {
  auto args = std::make_shared<BenchArgs>();
  CLI::App* cmd =
      app.add_subcommand("bench", "Measure matmul rate, training and sampling speed, memory");
  cmd->add_option("config", args->config_path,
                  "The config to measure (default: the bundled configs/shakespeare_char.toml)");
  add_threads_flag(cmd, args->threads);
  cmd->add_option("--device", args->device, "cpu, cuda or cuda:N: where the model and matmuls run");
  cmd->add_option("--repeats", args->repeats, "Measured repeats of each figure (median)")
      ->check(integer_flag(between(1, 1000)));
  cmd->add_option("--steps", args->steps, "Training steps measured per repeat")
      ->check(integer_flag(between(1, 100000)));
  cmd->add_option("--num-samples", args->num_samples, "Batch N of the batched sampling figures")
      ->check(integer_flag(between(2, 1000)));
  cmd->add_option("--max-new-tokens", args->max_new_tokens, "Tokens per sample")
      ->check(integer_flag(between(1, 100000)));
  cmd->add_flag("--json", args->json, "Print JSON instead of a table");
  cmd->add_flag("--checkpoint", args->checkpoint,
                "Measure only checkpoint save and load: their fsync and checksum shares");
  cmd->add_option("--checkpoint-dir", args->checkpoint_dir,
                  "A new directory for --checkpoint to write and remove after (default "
                  "runs/bench-checkpoint); one that exists is refused");
  cmd->add_flag("--run", args->run,
                "Measure only the whole recipe: train it once, as train does, and print where "
                "the wall time went (start-up, data, steps, evals, checkpoints, ...)");
  cmd->add_option("--run-dir", args->run_dir,
                  "A new directory for --run to train into and remove after (default "
                  "runs/bench-run); one that exists is refused");
  cmd->add_option("--serve", args->serve,
                  "Measure only the live lab on this run: request latencies with --clients "
                  "clients, and streamed sampling against sample's");
  cmd->add_option("--clients", args->clients, "Concurrent clients of --serve")
      ->check(integer_flag(between(1, 256)));
  cmd->add_option("--requests", args->requests, "Requests per client and kind of --serve")
      ->check(integer_flag(between(1, 1000000)));
  cmd->add_option("--inspect", args->inspect,
                  "Measure only inspection on this run: each view's time in units of one forward "
                  "pass over its windows");
  cmd->add_option("--windows", args->windows, "Windows of --inspect")
      ->check(integer_flag(between(1, 100000)));
  cmd->add_option("--probes", args->probes, "Probe sequences of --inspect")
      ->check(integer_flag(between(1, 10000)));
  cmd->add_option("--exact", args->exact,
                  "Heads --inspect's ablation runs exactly (a number, or all)")
      ->check([](const std::string& s) {
        try {
          exact_heads(s);  // inspect's own reading of --exact
          return std::string();
        } catch (const UsageError& e) {
          return std::string(e.what());
        }
      });
  return with_overrides(cmd, args->overrides, "--train.dtype=bfloat16",
                        [args] { return run_bench(*args); });
}

}  // namespace tinylm
