#include "train/trainer.h"

#include <ATen/CPUGeneratorImpl.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <limits>
#include <mutex>
#include <optional>
#include <sstream>
#include <stdexcept>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "data/batches.h"
#include "data/io/fingerprint.h"
#include "model/analysis/head_snapshot.h"
#include "model/analysis/induction_probe.h"
#include "model/gpt.h"
#include "model/ops/onednn_matmul.h"
#include "train/blas_core.h"
#include "train/estimate_loss.h"
#include "train/lr_schedule.h"
#include "train/precision.h"
#include "train/run/checkpoint.h"
#include "train/run/checkpoint_transaction.h"
#include "train/run/evaluate.h"
#include "train/run/phase_change.h"
#include "train/run/progress.h"
#include "train/run/run_corpus.h"
#include "train/run/snapshots.h"
#include "train/run_breakdown.h"
#include "train/train_step.h"
#include "train/training_lock.h"

namespace tinylm {
namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

TrainConfig with_dtype(TrainConfig t, Dtype dtype) {
  t.dtype = dtype;
  return t;
}

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
TrainingData load_training_data(const RunConfig& config, const fs::path* resumed_run,
                                bool progress) {
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
      for (int64_t h = 0; h < t.size(1); ++h)
        row.push_back(std::round(t[l][h].item<double>() * 1e4) / 1e4);
      rows.push_back(row);
    }
    return rows;
  };
  return {{"loss_first_half", result.losses.first_half},
          {"loss_second_half", result.losses.second_half},
          {"previous_token", rounded(result.scores.values.at("previous_token"))},
          {"induction", rounded(result.scores.values.at("induction"))}};
}

// A reading of the probe as the detector takes it: from the record metrics.jsonl keeps, so
// that a resumed run, replaying that file, reads exactly what the unbroken run read.
ProbeReading probe_reading(int64_t step, const json& record) {
  const auto table = [](const json& rows) {
    std::vector<double> flat;
    for (const json& row : rows)
      for (const json& v : row) flat.push_back(v.get<double>());
    return torch::tensor(flat, torch::kFloat64).view({static_cast<int64_t>(rows.size()), -1});
  };
  return {step, record.at("loss_first_half").get<double>(),
          record.at("loss_second_half").get<double>(), table(record.at("previous_token")),
          table(record.at("induction"))};
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
      f.add(std::string_view(reinterpret_cast<const char*>(ids.data()),
                             ids.size() * sizeof(int64_t)));
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

// The generators of one run, seeded apart from train.seed.
struct Generators {
  explicit Generators(int64_t seed)
      : init(at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(seed))),
        train(at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(seed) + 1)),
        eval(at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(seed) + 2)),
        probe(at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(seed) + 3)) {}
  torch::Generator init, train, eval, probe;
};

// One training run, as named steps: start (refuse or agree), make the model, restore, then
// for each step: evaluate and checkpoint when due, train a step, log it.
class Trainer {
 public:
  Trainer(const RunConfig& config, const TrainOptions& options);
  TrainResult run();

 private:
  TrainingData start();
  void restore();
  void evaluate_and_checkpoint(int64_t step);
  StepResult train_one_step(int64_t step);
  void log_step(int64_t step, const StepResult& result, double seconds);
  void stop_if_diverged(const std::string& what, double value, int64_t step) const;
  void checkpoint(const fs::path& dir);
  void snapshot(int64_t step);
  const json& read_probe(int64_t step);
  void replay_probe_readings();
  TrainResult finish();

  RunConfig config_;
  const TrainConfig& t_ = config_.train;
  const TrainOptions& options_;
  const fs::path& out_ = options_.out_dir;
  RankGroup* const group_ = options_.group;
  const int rank_ = group_ ? group_->rank() : 0, world_ = group_ ? group_->size() : 1;
  const bool writer_ = rank_ == 0;    // writes the run directory
  std::optional<TrainingLock> lock_;  // the writer's, from start() on
  const TrainingData data_ = start();
  const torch::Device device_ = options_.device.value_or(torch::Device(t_.device));
  const PrecisionChoice precision_ = choose_precision(t_.dtype, device_, cpu_flags());
  const TrainConfig step_config_ = with_dtype(t_, precision_.dtype);  // t_, dtype chosen
  Generators rng_{t_.seed};
  torch::Tensor probe_;        // the induction probe, read every probe_interval steps and at evals;
                               // undefined without it
  PhaseChangeDetector phase_;  // reads the probe
  json last_probe_;            // the last reading's record
  torch::Tensor snapshot_text_;   // the snapshots' text probe; undefined when none are taken
  torch::Tensor snapshot_probe_;  // ... and their induction probe
  int64_t snapshots_taken_ = 0;
  double snapshot_seconds_ = 0.0;
  RunBreakdown time_;               // where the wall time went, logged at the end
  double step_data_seconds_ = 0.0;  // drawing the batches of the step under way
  GPT model_{nullptr};
  std::optional<AdamW> optimizer_;
  std::optional<ThreadReplicas> replicas_;  // none: operators split over the threads
  ThreadReplicas* replicas() { return replicas_ ? &*replicas_ : nullptr; }
  TrainingState state_;
  std::optional<EpochSampler> epochs_;
  std::optional<MetricsLog> metrics_;
  ProgressLine progress_{options_.progress && writer_};
  Clock::time_point started_;
  int64_t first_step_ = 0;
  int64_t saved_step_ = -1;         // the step of the last checkpoint in out_ (-1: none yet)
  double val_loss_ = std::nan("");  // the last estimate of this call
  double step_seconds_avg_ = 0.0;   // moving average, for the ETA
  double step_seconds_sum_ = 0.0;   // the optimizer steps alone, as the step lines time them
};

Trainer::Trainer(const RunConfig& config, const TrainOptions& options)
    : config_(config), options_(options) {
  config_.model.vocab_size = data_.tokenizer->vocab_size();
  torch::manual_seed(static_cast<uint64_t>(t_.seed));
  // The probe needs R >= 2 (block_size >= 4); smaller models train without it. Its analyses
  // read activations on the CPU, so a model elsewhere trains without it too; rank 0 alone
  // runs it, for the log.
  if (probe_half_length(config_.model) >= 2 && device_.is_cpu() && writer_) {
    probe_ = repeated_random_tokens(kTrainingProbes, probe_half_length(config_.model),
                                    data_.tokenizer->vocab_size(), rng_.probe);
  }
  // Snapshots read the same probe, and the first tokens of the val split.
  if (probe_.defined() && t_.snapshots && data_.val_split.tokens.size() >= 2) {
    const int64_t T =
        std::min<int64_t>({config_.model.block_size, 64, data_.val_split.tokens.size()});
    snapshot_text_ = data_.val_split.tokens.slice(0, T).to_tensor();
    // The probe's first sequence with each half cut to 32 tokens: still a repeat, and
    // patterns of at most 64 x 64 per head, as the text's.
    const int64_t R = probe_.size(1) / 2, kept = std::min<int64_t>(R, 32);
    snapshot_probe_ = torch::cat({probe_[0].slice(0, 0, kept), probe_[0].slice(0, R, R + kept)});
  }
  model_ = GPT(config_.model);
  model_->init_weights(rng_.init);
  model_->to(device_);
  model_->train();
  optimizer_.emplace(model_, step_config_);
  if (options_.resume) restore();
  if (const int count = thread_replica_count(model_, t_); count > 1)
    replicas_.emplace(model_, *optimizer_, count);
  // Epoch sampling draws its windows in an order fixed by (seed, epoch); the checkpoint keeps
  // its place in it.
  if (config_.data.sampling == Sampling::kEpoch) {
    epochs_.emplace(data_.train_split.tokens, config_.model.block_size, t_.batch_size, "train",
                    static_cast<uint64_t>(t_.seed) + 4);
    if (options_.resume) epochs_->seek(state_.epoch);
    spdlog::info("epoch sampling: {} windows per epoch, at epoch {} window {}",
                 epochs_->windows_per_epoch(), epochs_->position().epoch,
                 epochs_->position().position);
  }
  if (writer_) {
    fs::create_directories(out_);
    // A resume with nothing left to train keeps the log whole: past the last checkpoint a
    // finished run's log holds only its closing time record.
    const bool finished = options_.resume && state_.step >= t_.max_iters;
    metrics_.emplace(out_ / "metrics.jsonl",
                     finished ? std::numeric_limits<uint64_t>::max() : state_.metrics_bytes,
                     options_.resume);
    if (options_.resume) replay_probe_readings();
  }
  spdlog::info("model: {:.2f}M parameters ({} layers, {} heads, n_embd {}, block {}, {} positions)",
               static_cast<double>(model_->num_parameters()) / 1e6, config_.model.n_layer,
               config_.model.n_head, config_.model.n_embd, config_.model.block_size,
               name_of(config_.model.pos_encoding));
  // The BLAS serves the float32 linears only where oneDNN's float32 kernel does not beat it.
  const bool onednn_float32 =
      precision_.dtype == Dtype::kFloat32 && device_.is_cpu() && onednn_float32_beats_blas();
  spdlog::info("precision: {} matmuls ({}); {}{}", name_of(precision_.dtype), precision_.reason,
               blas_core_description(),
               onednn_float32 ? ", the linears on oneDNN's AVX-512 float32 kernels" : "");
  if (t_.optimizer == OptimizerKind::kMuon) {
    spdlog::info("optimizer: Muon for the blocks' {} matrices (lr {:.2e}), AdamW for the rest",
                 optimizer_->muon_matrices(), t_.muon_learning_rate);
  }
  if (replicas_) {
    spdlog::info("threads: data parallel, each of the {} with its own replica of the model and "
                 "its share of a batch's {} rows",
                 replicas_->count(), t_.batch_size);
  }
}

// Everything that can refuse to start, on every rank; with a group the ranks then agree,
// so that one rank's reason stops them all at once.
TrainingData Trainer::start() {
  std::optional<TrainingData> loaded;
  std::string startup_error;
  try {
    check_batch_splits(t_, world_);
    // Refusals first, before a lock file is written into anything.
    check_run_directory(out_, options_.resume, writer_);
    if (writer_) lock_.emplace(out_);
    if (writer_ && options_.resume) {
      const CheckpointReadLock finished(out_);  // a checkpoint a kill left half moved
    }
    if (options_.resume && !fs::is_regular_file(out_ / "state.json")) {
      throw std::runtime_error("cannot resume: " + out_.string() + " holds no whole checkpoint");
    }
    loaded.emplace(load_training_data(config_, options_.resume ? &out_ : nullptr,
                                      options_.progress && writer_));
  } catch (const std::exception& e) {
    if (!group_) throw;
    startup_error = e.what();
  }
  if (group_) {
    const auto facts = loaded ? startup_facts(config_, *loaded, options_.build_id)
                              : std::vector<std::pair<std::string, std::string>>{};
    group_->agree("config", facts, startup_error);
    Fingerprint hash;
    for (const auto& [key, value] : facts) hash.add_field(key).add_field(value);
    spdlog::info("all {} ranks run {} with the same config and data (hash {})", world_,
                 options_.build_id, to_hex(hash.value()));
  }
  return std::move(*loaded);
}

void Trainer::restore() {
  try {
    const CheckpointReadLock read_lock(out_);
    state_ = load_training_state(out_);
    const int64_t model_step = load_weights(out_ / "model.safetensors", model_);
    const OptimizerFile moments = load_optimizer(out_, state_.step, model_step);
    optimizer_->restore(moments.tensors, moments.step, moments.path);
  } catch (const IntegrityError& e) {
    rethrow_with_best_hint(e, out_);
  }
  set_generator_state(rng_.train, state_.train_rng, (out_ / "state.json").string());
  set_generator_state(rng_.eval, state_.eval_rng, (out_ / "state.json").string());
  if (state_.threads != torch::get_num_threads() && writer_) {
    spdlog::warn(
        "the checkpoint was written with {} threads and this run uses {}: losses will "
        "differ in the last bits from an unbroken run",
        state_.threads, torch::get_num_threads());
  }
  if (!state_.dtype.empty() && state_.dtype != name_of(precision_.dtype) && writer_) {
    spdlog::warn("the checkpoint was trained with {} matmuls ({}) and this run uses {} ({})",
                 state_.dtype, state_.dtype_reason, name_of(precision_.dtype), precision_.reason);
  }
  if (state_.world_size != world_) {
    spdlog::info(
        "the checkpoint was written by {} rank{} and this run has {}: the data order "
        "is the same, so results now match an unbroken run to float tolerance, not "
        "bit for bit",
        state_.world_size, state_.world_size == 1 ? "" : "s", world_);
  }
  saved_step_ = state_.step;
  spdlog::info("resuming {} at step {} of {}", out_.string(), state_.step, t_.max_iters);
}

void Trainer::checkpoint(const fs::path& dir) {
  if (!writer_) return;
  state_.metrics_bytes = metrics_->bytes();
  state_.threads = torch::get_num_threads();
  state_.world_size = world_;
  state_.dtype = name_of(precision_.dtype);
  state_.dtype_reason = precision_.reason;
  state_.train_rng = generator_state(rng_.train);
  state_.eval_rng = generator_state(rng_.eval);
  if (epochs_) state_.epoch = epochs_->position();
  const auto start = Clock::now();
  save_checkpoint(dir, config_, *data_.tokenizer, model_, optimizer_->moments(), state_);
  time_.add(RunBreakdown::kCheckpoints, seconds_since(start));
  if (dir == out_) saved_step_ = state_.step;
}

void Trainer::evaluate_and_checkpoint(int64_t step) {
  const auto t_eval = Clock::now();
  const Dtype dtype = precision_.dtype;
  const double train_loss =
      estimate_loss(model_, data_.train, t_.eval_iters, rng_.eval, dtype, group_, replicas());
  val_loss_ =
      estimate_loss(model_, data_.val, t_.eval_iters, rng_.eval, dtype, group_, replicas());
  time_.add(step == t_.max_iters ? RunBreakdown::kFinalEval : RunBreakdown::kEvals,
            seconds_since(t_eval));
  stop_if_diverged("train loss", train_loss, step);
  stop_if_diverged("val loss", val_loss_, step);
  progress_.clear();
  const double train_bpb = bits_per_byte(train_loss, data_.train_split.tokens_per_byte());
  const double val_bpb = bits_per_byte(val_loss_, data_.val_split.tokens_per_byte());
  spdlog::info("eval step {}: train loss {:.4f}, val loss {:.4f} ({:.4f} bits/byte) ({:.2f} s)",
               step, train_loss, val_loss_, val_bpb, seconds_since(t_eval));
  json record = {{"kind", "eval"},
                 {"step", step},
                 {"train_loss", train_loss},
                 {"val_loss", val_loss_},
                 {"train_bpb", train_bpb},
                 {"val_bpb", val_bpb},
                 {"lr", learning_rate_at(step, t_)},
                 {"elapsed_s", seconds_since(started_)}};
  if (probe_.defined()) {
    const json& heads = read_probe(step);
    spdlog::info(
        "  probe: loss {:.3f} on the repeat vs {:.3f} first time; top previous-token "
        "head {}, top induction head {}",
        heads["loss_second_half"].get<double>(), heads["loss_first_half"].get<double>(),
        top_head(heads["previous_token"]), top_head(heads["induction"]));
    record["probe"] = heads;
  }
  if (metrics_) metrics_->write(record);
  state_.last_eval_step = step;
  const bool improved = val_loss_ < state_.best_val_loss;
  if (improved) state_.best_val_loss = val_loss_;
  checkpoint(out_);
  if (improved) checkpoint(out_ / "best");
}

// Reads the probe at `step` (once: an eval reuses the reading of its step), writes the
// reading to metrics.jsonl, and feeds the phase-change detector, which logs, records and
// keeps in state.json the phase change at the reading that completes it.
const json& Trainer::read_probe(int64_t step) {
  if (!last_probe_.is_null() && last_probe_.at("step").get<int64_t>() == step) return last_probe_;
  const auto start = Clock::now();
  json record = probe_record(model_, probe_);
  time_.add(RunBreakdown::kProbes, seconds_since(start));
  record["step"] = step;
  last_probe_ = record;
  record["kind"] = "probe";
  if (metrics_) metrics_->write(record);
  if (const std::optional<PhaseChange> found = phase_.add(probe_reading(step, record))) {
    progress_.clear();
    spdlog::info("{}", found->summary());
    state_.phase_change = found->to_json();
    json event = state_.phase_change;
    event["kind"] = "phase_change";
    event["elapsed_s"] = seconds_since(started_);
    if (metrics_) metrics_->write(event);
  }
  return last_probe_;
}

// A resumed run's detector reads again what the run read before its checkpoint: the probe
// records of metrics.jsonl, cut at the checkpoint.
void Trainer::replay_probe_readings() {
  std::ifstream in(out_ / "metrics.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    const json record = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!record.is_object() || record.value("kind", "") != "probe") continue;
    const int64_t step = record.at("step").get<int64_t>();
    phase_.add(probe_reading(step, record));
    last_probe_ = record;
    last_probe_.erase("kind");
  }
}

void Trainer::snapshot(int64_t step) {
  if (!snapshot_text_.defined() || !is_snapshot_step(step, t_.eval_interval, t_.max_iters)) return;
  if (fs::exists(snapshot_path(out_, step))) return;  // taken before a resume
  const auto start = Clock::now();
  save_snapshot(out_, step, snapshot_heads(model_, snapshot_text_, snapshot_probe_), snapshot_text_,
                snapshot_probe_);
  snapshot_seconds_ += seconds_since(start);
  time_.add(RunBreakdown::kSnapshots, seconds_since(start));
  ++snapshots_taken_;
}

StepResult Trainer::train_one_step(int64_t step) {
  seed_dropout(device_, t_.seed, step, rank_);
  const bool stop_wanted = options_.stop_requested && options_.stop_requested->load();
  step_data_seconds_ = 0.0;
  const auto next_batch = [&] {
    const auto start = Clock::now();
    auto batch = epochs_ ? epochs_->next() : data_.train.sample(rng_.train);
    step_data_seconds_ += seconds_since(start);
    return batch;
  };
  return train_step(model_, *optimizer_, step_config_, learning_rate_at(step, t_), next_batch,
                    group_, stop_wanted, replicas());
}

// A loss or gradient norm that is not finite means this step's update has already spoilt
// the weights: stop before they reach a checkpoint, so the last one written stays the run's.
// The check is one comparison per step; the values are already on the CPU for the log.
void Trainer::stop_if_diverged(const std::string& what, double value, int64_t step) const {
  if (std::isfinite(value)) return;
  throw std::runtime_error(fmt::format(
      "{} became {} at step {} ({}); the run diverged. Lower train.learning_rate or raise "
      "train.warmup_iters{}",
      what, std::isnan(value) ? "NaN" : "infinite", step,
      saved_step_ >= 0 ? fmt::format("last finite checkpoint: step {}", saved_step_)
                       : std::string("no checkpoint was written"),
      saved_step_ >= 0 ? fmt::format(", or continue from step {} with --resume and "
                                     "--train.learning_rate=...; {} still holds it",
                                     saved_step_, out_.string())
                       : ""));
}

void Trainer::log_step(int64_t step, const StepResult& result, double seconds) {
  const double tokens = static_cast<double>(t_.batch_size * config_.model.block_size *
                                            t_.gradient_accumulation_steps);
  step_seconds_avg_ = step == first_step_ ? seconds : 0.9 * step_seconds_avg_ + 0.1 * seconds;
  step_seconds_sum_ += seconds;
  if (step % t_.log_interval == 0) {
    const double lr = learning_rate_at(step, t_);
    progress_.clear();
    spdlog::info("step {}: loss {:.4f}, lr {:.2e}, {:.1f} ms/iter, {:.0f} tok/s, grad norm {:.3f}",
                 step, result.loss, lr, seconds * 1e3, tokens / seconds, result.grad_norm);
    if (metrics_) {
      metrics_->write({{"kind", "train"},
                       {"step", step},
                       {"loss", result.loss},
                       {"lr", lr},
                       {"grad_norm", result.grad_norm},
                       {"ms_per_iter", seconds * 1e3},
                       {"tokens_per_s", tokens / seconds},
                       {"elapsed_s", seconds_since(started_)}});
    }
  }
  progress_.update(step + 1, t_.max_iters, result.loss, tokens / step_seconds_avg_,
                   step_seconds_avg_ * static_cast<double>(t_.max_iters - step - 1));
}

TrainResult Trainer::run() {
  started_ = Clock::now();
  time_.add(RunBreakdown::kStartup, RunBreakdown::since_process_start());
  first_step_ = state_.step;
  while (true) {
    const int64_t step = state_.step;
    const bool eval_due = step % t_.eval_interval == 0 || step == t_.max_iters;
    if (probe_.defined() && t_.probe_interval > 0 && step % t_.probe_interval == 0)
      read_probe(step);
    if (eval_due && state_.last_eval_step != step) evaluate_and_checkpoint(step);
    snapshot(step);
    if (step >= t_.max_iters) return finish();
    const auto t_step = Clock::now();
    const StepResult result = train_one_step(step);
    stop_if_diverged("loss", result.loss, step);
    stop_if_diverged("the gradient norm", result.grad_norm, step);
    state_.step = step + 1;
    time_.add(RunBreakdown::kData, step_data_seconds_);
    time_.add(RunBreakdown::kSteps, seconds_since(t_step) - step_data_seconds_);
    log_step(step, result, seconds_since(t_step));
    if (options_.on_step) options_.on_step(state_.step);
    // One process stops as soon as asked; ranks when the all-reduce has told them all, so
    // that they stop after the same step.
    const bool stop =
        group_ ? result.stop : options_.stop_requested && options_.stop_requested->load();
    if (stop) {
      progress_.clear();
      checkpoint(out_);
      if (writer_) {
        spdlog::warn("interrupted: checkpoint at step {} written to {}; continue with --resume",
                     state_.step, out_.string());
      }
      return {TrainOutcome::kInterrupted, state_.step, val_loss_, time_,
              RunBreakdown::since_process_start()};
    }
  }
}

TrainResult Trainer::finish() {
  progress_.clear();
  const double elapsed = seconds_since(started_);
  const int64_t steps = state_.step - first_step_;
  if (steps == 0) {
    spdlog::info("nothing to train: {} is at step {} of {} (raise --train.max_iters to go on)",
                 out_.string(), state_.step, t_.max_iters);
  } else {
    // Two rates, named: the steps alone (what the step lines print), and the whole run's
    // wall time per step, evals, checkpoints and snapshots included.
    spdlog::info(
        "done: {} steps in {:.1f} s: {:.1f} ms/step training, {:.1f} ms/step wall (evals, "
        "checkpoints, snapshots included); val loss {:.4f}, best {:.4f}; run in {}",
        steps, elapsed, step_seconds_sum_ * 1e3 / static_cast<double>(steps),
        elapsed * 1e3 / static_cast<double>(steps), val_loss_, state_.best_val_loss, out_.string());
  }
  const double wall = RunBreakdown::since_process_start();
  if (steps > 0 && writer_) {
    spdlog::info("{}", time_.summary(wall));
    json record = {{"kind", "time"}, {"step", state_.step}, {"wall_s", wall}};
    for (const auto& [part, seconds] : time_.parts(wall)) record["parts_s"][part] = seconds;
    metrics_->write(record);
  }
  if (probe_.defined() && !phase_.found()) spdlog::info("{}", phase_.none_summary());
  if (snapshots_taken_ > 0) {
    spdlog::info(
        "snapshots of the heads: {} taken in {:.2f} s, {:.1f}% of this run's {:.1f} s ({})",
        snapshots_taken_, snapshot_seconds_, 100.0 * snapshot_seconds_ / elapsed, elapsed,
        (out_ / "snapshots").string());
  }
  return {TrainOutcome::kFinished, state_.step, val_loss_, time_, wall};
}

// A run: a whole checkpoint, or one a kill left committed but not yet moved into place.
bool holds_a_checkpoint(const fs::path& out) {
  return fs::is_regular_file(out / "state.json") || fs::is_directory(out / ".checkpoint-commit");
}

// What a start killed before its first checkpoint committed leaves, and a new start may
// replace: the locks, the staged checkpoint, and the metrics log, which then holds only
// records of step 0 (the probe's reading and the first eval; the first checkpoint is step
// 0's). A log with any other line is not ours to drop.
bool left_by_a_failed_start(const fs::path& entry) {
  const std::string name = entry.filename().string();
  if (name == TrainingLock::kFileName || name == ".checkpoint.lock" || name == ".checkpoint-next") {
    return true;
  }
  if (name != "metrics.jsonl" || !fs::is_regular_file(entry)) return false;
  std::ifstream in(entry);
  for (std::string line; std::getline(in, line);) {
    const json record = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!record.is_object() || record.value("step", json()) != json(0)) return false;
  }
  return true;
}

}  // namespace

void check_run_directory(const fs::path& out, bool resume, bool writer) {
  if (resume) {
    if (holds_a_checkpoint(out)) return;
    throw std::runtime_error(
        "cannot resume: " + out.string() +
        (fs::exists(out) ? " is not a tinylm run directory (no state.json)" : " does not exist") +
        (writer ? ""
                : "; every rank reads the checkpoint, so the run directory must be at the same "
                  "path on every machine"));
  }
  if (!writer || !fs::is_directory(out)) return;
  if (holds_a_checkpoint(out)) {
    throw std::runtime_error("run directory " + out.string() +
                             " already holds a run; pass --resume to continue it or --out to "
                             "choose another");
  }
  for (const auto& entry : fs::directory_iterator(out)) {
    if (left_by_a_failed_start(entry.path())) continue;
    throw std::runtime_error("run directory " + out.string() +
                             " already exists and is not a tinylm run (it holds " +
                             entry.path().filename().string() + "); choose another with --out");
  }
}

TrainResult train(const RunConfig& config, const TrainOptions& options) {
  return Trainer(config, options).run();
}

}  // namespace tinylm
