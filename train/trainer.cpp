#include "train/trainer.h"

#include <ATen/CPUGeneratorImpl.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <mutex>
#include <optional>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "data/batches.h"
#include "data/fingerprint.h"
#include "model/gpt.h"
#include "model/induction_probe.h"
#include "train/checkpoint.h"
#include "train/evaluate.h"
#include "train/lr_schedule.h"
#include "train/progress.h"
#include "train/run_corpus.h"
#include "train/train_step.h"

namespace tinylm {
namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Appends one JSON object per line, flushed, and counts the bytes so a checkpoint can say
// where the log stood.
class MetricsLog {
 public:
  MetricsLog(const fs::path& path, uint64_t keep_bytes, bool resume) : path_(path) {
    if (resume && fs::exists(path)) {
      const uint64_t size = fs::file_size(path);
      if (size > keep_bytes) fs::resize_file(path, keep_bytes);  // drop lines after the checkpoint
      bytes_ = std::min(size, keep_bytes);
    }
    out_.open(path, resume ? std::ios::app : std::ios::trunc);
    if (!out_) throw std::runtime_error("cannot write " + path.string());
  }
  void write(const json& record) {
    const std::string line = record.dump() + "\n";
    out_ << line << std::flush;
    if (!out_) throw std::runtime_error("cannot write " + path_.string());
    bytes_ += line.size();
  }
  uint64_t bytes() const { return bytes_; }

 private:
  fs::path path_;
  std::ofstream out_;
  uint64_t bytes_ = 0;
};

struct TrainingData {
  std::shared_ptr<const Tokenizer> tokenizer;
  TokenSplit train_split, val_split;
  BatchSampler train;
  BatchSampler val;
};

// Text -> tokens (through the cache) -> random-window samplers. On resume the tokens must come
// from the tokenizer the run was trained with.
TrainingData load_training_data(const RunConfig& config, const fs::path* resumed_run, bool progress) {
  const auto start = Clock::now();
  RunDataOptions options;
  options.progress = progress;
  if (resumed_run) options.tokenizer = load_tokenizer(*resumed_run);
  RunData data = load_run_data(config, options);
  const int64_t T = config.model.block_size, B = config.train.batch_size;
  spdlog::info("data: {} ({} train / {} val tokens; {}; {:.2f} bytes/token) ready in {:.2f} s",
               describe_corpus(config), data.train.tokens.size(), data.val.tokens.size(),
               data.tokenizer->describe(), 1.0 / data.val.tokens_per_byte(), seconds_since(start));
  return {data.tokenizer, data.train, data.val, BatchSampler(data.train.tokens, T, B, "train"),
          BatchSampler(data.val.tokens, T, B, "val")};
}

// The heads' previous-token and induction scores on a fixed probe, and its two half losses,
// so that metrics.jsonl shows when induction heads form. Rounded: these are for plotting.
json probe_record(GPT& model, const torch::Tensor& probe) {
  const ProbeResult result = run_induction_probe(model, probe);
  const auto rounded = [](const torch::Tensor& t) {  // (L, nh) -> [[...]]
    json rows = json::array();
    for (int64_t l = 0; l < t.size(0); ++l) {
      json row = json::array();
      for (int64_t h = 0; h < t.size(1); ++h) row.push_back(std::round(t[l][h].item<double>() * 1e4) / 1e4);
      rows.push_back(row);
    }
    return rows;
  };
  return {{"loss_first_half", result.losses.first_half},
          {"loss_second_half", result.losses.second_half},
          {"previous_token", rounded(result.scores.values.at("previous_token"))},
          {"induction", rounded(result.scores.values.at("induction"))}};
}

// "1.2 0.934": the head with the highest score in an (L, nh) table.
std::string top_head(const json& table) {
  std::string best;
  double best_score = -1.0;
  for (size_t l = 0; l < table.size(); ++l) {
    for (size_t h = 0; h < table[l].size(); ++h) {
      if (table[l][h].get<double>() > best_score) {
        best_score = table[l][h].get<double>();
        best = std::to_string(l) + "." + std::to_string(h);
      }
    }
  }
  return fmt::format("{} ({:.3f})", best, best_score);
}

// The facts every rank must share before the first step: the build, the resolved config
// (but paths, which may differ between machines that hold the same files) and what the data
// came to.
std::vector<std::pair<std::string, std::string>> startup_facts(const RunConfig& config,
                                                               const TrainingData& data,
                                                               const std::string& build_id) {
  std::vector<std::pair<std::string, std::string>> facts{{"tinylm build", build_id}};
  std::istringstream toml(to_toml(config));
  std::string line, section;
  while (std::getline(toml, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (line[0] == '[') {
      section = line.substr(1, line.size() - 2);
      continue;
    }
    const size_t eq = line.find(" = ");
    const std::string key = section + "." + line.substr(0, eq);
    if (key == "data.path" || key == "data.val_path" || key == "data.tokenizer_model" ||
        key == "data.cache_dir" || key == "train.device") {
      continue;
    }
    facts.emplace_back(key, line.substr(eq + 3));
  }
  const auto sample = [](const TokenSequence& tokens) {  // the ends of a split, not all of it
    Fingerprint f;
    const int64_t n = std::min<int64_t>(tokens.size(), 1 << 16);
    std::vector<int64_t> ids(static_cast<size_t>(n));
    for (const int64_t start : {int64_t{0}, tokens.size() - n}) {
      tokens.copy_to(start, n, ids.data());
      f.add(std::string_view(reinterpret_cast<const char*>(ids.data()), ids.size() * sizeof(int64_t)));
    }
    return std::to_string(tokens.size()) + " tokens, " + to_hex(f.value());
  };
  facts.emplace_back("the tokenizer", data.tokenizer->describe());
  facts.emplace_back("the train split", sample(data.train_split.tokens));
  facts.emplace_back("the val split", sample(data.val_split.tokens));
  return facts;
}

// Dropout draws from LibTorch's default generator. Seeding it from (seed, step, rank) at
// every step gives each rank masks of its own and makes a resumed run draw what an unbroken
// one would, with no generator state to save.
void seed_dropout(const torch::Device& device, int64_t seed, int64_t step, int rank) {
  Fingerprint f;
  f.add_field(std::to_string(seed)).add_field(std::to_string(step)).add_field(std::to_string(rank));
  auto generator = at::globalContext().defaultGenerator(device);
  std::lock_guard<std::mutex> lock(generator.mutex());
  generator.set_current_seed(f.value());
}

}  // namespace

TrainResult train(const RunConfig& run_config, const TrainOptions& options) {
  RunConfig config = run_config;
  const TrainConfig& t = config.train;
  const fs::path& out = options.out_dir;
  RankGroup* const group = options.group;
  const bool writer = group == nullptr || group->rank() == 0;  // writes the run directory
  const int rank = group ? group->rank() : 0, world = group ? group->size() : 1;

  // Everything that can refuse to start, on every rank; with a group the ranks then agree,
  // so that one rank's reason stops them all at once.
  std::optional<TrainingData> loaded;
  std::string startup_error;
  try {
    check_batch_splits(t, world);
    if (writer && !options.resume && fs::exists(out) && !fs::is_empty(out)) {
      throw std::runtime_error("run directory " + out.string() +
                               " already exists; pass --resume to continue it or --out to choose "
                               "another");
    }
    if (options.resume && !fs::is_regular_file(out / "state.json")) {
      throw std::runtime_error("cannot resume: " + out.string() +
                               " is not a tinylm run directory (no state.json)" +
                               (writer ? "" : "; every rank reads the checkpoint, so the run "
                                              "directory must be at the same path on every machine"));
    }
    loaded.emplace(load_training_data(config, options.resume ? &out : nullptr, options.progress && writer));
  } catch (const std::exception& e) {
    if (!group) throw;
    startup_error = e.what();
  }
  if (group) {
    const auto facts = loaded ? startup_facts(config, *loaded, options.build_id)
                              : std::vector<std::pair<std::string, std::string>>{};
    group->agree("config", facts, startup_error);
    Fingerprint hash;
    for (const auto& [key, value] : facts) hash.add_field(key).add_field(value);
    spdlog::info("all {} ranks run {} with the same config and data (hash {})", world,
                 options.build_id, to_hex(hash.value()));
  }
  const TrainingData& data = *loaded;
  const Tokenizer& tokenizer = *data.tokenizer;
  config.model.vocab_size = tokenizer.vocab_size();
  const torch::Device device = options.device.value_or(torch::Device(t.device));

  // Model, optimizer and every source of randomness, seeded apart.
  torch::manual_seed(static_cast<uint64_t>(t.seed));
  auto init_rng = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(t.seed));
  auto train_rng = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(t.seed) + 1);
  auto eval_rng = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(t.seed) + 2);
  auto probe_rng = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(t.seed) + 3);
  // The probe needs R >= 2 (block_size >= 4); smaller models train without it. Its analyses
  // read activations on the CPU, so a model elsewhere trains without it too; rank 0 alone
  // runs it, for the log.
  const bool with_probe = probe_half_length(config.model) >= 2 && device.is_cpu() && writer;
  const torch::Tensor probe =
      with_probe ? repeated_random_tokens(kTrainingProbes, probe_half_length(config.model),
                                          tokenizer.vocab_size(), probe_rng)
                 : torch::Tensor();
  GPT model(config.model);
  model->init_weights(init_rng);
  model->to(device);
  model->train();
  AdamW optimizer(model, t);

  TrainingState state;
  if (options.resume) {
    state = load_training_state(out);
    load_weights(out / "model.safetensors", model);
    load_optimizer(out, optimizer, state.step);
    set_generator_state(train_rng, state.train_rng, (out / "state.json").string());
    set_generator_state(eval_rng, state.eval_rng, (out / "state.json").string());
    if (state.threads != torch::get_num_threads() && writer) {
      spdlog::warn("the checkpoint was written with {} threads and this run uses {}: losses will "
                   "differ in the last bits from an unbroken run",
                   state.threads, torch::get_num_threads());
    }
    if (state.world_size != world) {
      spdlog::info("the checkpoint was written by {} rank{} and this run has {}: the data order "
                   "is the same, so results now match an unbroken run to float tolerance, not "
                   "bit for bit",
                   state.world_size, state.world_size == 1 ? "" : "s", world);
    }
    spdlog::info("resuming {} at step {} of {}", out.string(), state.step, t.max_iters);
  }
  // Epoch sampling draws its windows in an order fixed by (seed, epoch); the checkpoint keeps
  // its place in it.
  std::optional<EpochSampler> epochs;
  if (config.data.sampling == "epoch") {
    epochs.emplace(data.train_split.tokens, config.model.block_size, t.batch_size, "train",
                   static_cast<uint64_t>(t.seed) + 4);
    if (options.resume) epochs->seek(state.epoch);
    spdlog::info("epoch sampling: {} windows per epoch, at epoch {} window {}",
                 epochs->windows_per_epoch(), epochs->position().epoch, epochs->position().position);
  }
  std::optional<MetricsLog> metrics;
  if (writer) {
    fs::create_directories(out);
    metrics.emplace(out / "metrics.jsonl", state.metrics_bytes, options.resume);
  }
  spdlog::info("model: {:.2f}M parameters ({} layers, {} heads, n_embd {}, block {}, {} positions)",
               static_cast<double>(model->num_parameters()) / 1e6, config.model.n_layer,
               config.model.n_head, config.model.n_embd, config.model.block_size,
               config.model.pos_encoding);

  const auto checkpoint = [&](const fs::path& dir) {
    if (!writer) return;
    state.metrics_bytes = metrics->bytes();
    state.threads = torch::get_num_threads();
    state.world_size = world;
    state.train_rng = generator_state(train_rng);
    state.eval_rng = generator_state(eval_rng);
    if (epochs) state.epoch = epochs->position();
    save_checkpoint(dir, config, tokenizer, model, optimizer, state);
  };

  const int64_t tokens_per_step = t.batch_size * config.model.block_size * t.gradient_accumulation_steps;
  const auto start = Clock::now();
  const int64_t first_step = state.step;
  double val_loss = std::nan("");
  double step_seconds_avg = 0.0;  // moving average for the ETA
  ProgressLine progress(options.progress && writer);

  while (true) {
    const int64_t step = state.step;
    if ((step % t.eval_interval == 0 || step == t.max_iters) && state.last_eval_step != step) {
      const auto t_eval = Clock::now();
      const double train_loss = estimate_loss(model, data.train, t.eval_iters, eval_rng, group);
      val_loss = estimate_loss(model, data.val, t.eval_iters, eval_rng, group);
      const json heads = probe.defined() ? probe_record(model, probe) : json();
      progress.clear();
      const double train_bpb = bits_per_byte(train_loss, data.train_split.tokens_per_byte());
      const double val_bpb = bits_per_byte(val_loss, data.val_split.tokens_per_byte());
      spdlog::info("eval step {}: train loss {:.4f}, val loss {:.4f} ({:.4f} bits/byte) ({:.2f} s)",
                   step, train_loss, val_loss, val_bpb, seconds_since(t_eval));
      json record = {{"kind", "eval"}, {"step", step}, {"train_loss", train_loss},
                     {"val_loss", val_loss}, {"train_bpb", train_bpb}, {"val_bpb", val_bpb},
                     {"lr", learning_rate_at(step, t)}, {"elapsed_s", seconds_since(start)}};
      if (probe.defined()) {
        spdlog::info("  probe: loss {:.3f} on the repeat vs {:.3f} first time; top previous-token "
                     "head {}, top induction head {}",
                     heads["loss_second_half"].get<double>(), heads["loss_first_half"].get<double>(),
                     top_head(heads["previous_token"]), top_head(heads["induction"]));
        record["probe"] = heads;
      }
      if (metrics) metrics->write(record);
      state.last_eval_step = step;
      const bool improved = val_loss < state.best_val_loss;
      if (improved) state.best_val_loss = val_loss;
      checkpoint(out);
      if (improved) checkpoint(out / "best");
    }
    if (step >= t.max_iters) break;

    const auto t_step = Clock::now();
    const double lr = learning_rate_at(step, t);
    seed_dropout(device, t.seed, step, rank);
    const bool stop_wanted = options.stop_requested && options.stop_requested->load();
    const StepResult result = train_step(
        model, optimizer, t, lr, [&] { return epochs ? epochs->next() : data.train.sample(train_rng); },
        group, stop_wanted);
    const double loss_sum = result.loss, grad_norm = result.grad_norm;
    state.step = step + 1;
    const double dt = seconds_since(t_step);
    step_seconds_avg = step == first_step ? dt : 0.9 * step_seconds_avg + 0.1 * dt;

    if (step % t.log_interval == 0) {
      progress.clear();
      spdlog::info("step {}: loss {:.4f}, lr {:.2e}, {:.1f} ms/iter, {:.0f} tok/s, grad norm {:.3f}",
                   step, loss_sum, lr, dt * 1e3, tokens_per_step / dt, grad_norm);
      if (metrics) {
        metrics->write({{"kind", "train"}, {"step", step}, {"loss", loss_sum}, {"lr", lr},
                        {"grad_norm", grad_norm}, {"ms_per_iter", dt * 1e3},
                        {"tokens_per_s", tokens_per_step / dt}, {"elapsed_s", seconds_since(start)}});
      }
    }
    progress.update(state.step, t.max_iters, loss_sum, tokens_per_step / step_seconds_avg,
                    step_seconds_avg * static_cast<double>(t.max_iters - state.step));
    if (options.on_step) options.on_step(state.step);
    // One process stops as soon as asked; ranks when the all-reduce has told them all, so
    // that they stop after the same step.
    const bool stop = group ? result.stop : options.stop_requested && options.stop_requested->load();
    if (stop) {
      progress.clear();
      checkpoint(out);
      if (writer) {
        spdlog::warn("interrupted: checkpoint at step {} written to {}; continue with --resume",
                     state.step, out.string());
      }
      return {TrainOutcome::kInterrupted, state.step, val_loss};
    }
  }
  progress.clear();
  const double elapsed = seconds_since(start);
  const int64_t steps = state.step - first_step;
  if (steps == 0) {
    spdlog::info("nothing to train: {} is at step {} of {} (raise --train.max_iters to go on)",
                 out.string(), state.step, t.max_iters);
    return {TrainOutcome::kFinished, state.step, state.best_val_loss};
  }
  spdlog::info("done: {} steps in {:.1f} s ({:.1f} ms/iter), val loss {:.4f}, best {:.4f}; run in {}",
               steps, elapsed, elapsed * 1e3 / static_cast<double>(steps), val_loss,
               state.best_val_loss, out.string());
  return {TrainOutcome::kFinished, state.step, val_loss};
}

}  // namespace tinylm
