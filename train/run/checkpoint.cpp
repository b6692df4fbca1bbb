#include "train/run/checkpoint.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "data/io/atomic_file.h"
#include "data/io/canonical_json.h"
#include "data/io/checksum.h"
#include "data/io/files.h"
#include "train/run/checkpoint_transaction.h"
#include "train/run/safetensors.h"

namespace tinylm {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

json read_json(const fs::path& path) {
  if (!fs::exists(path)) throw std::runtime_error(path.string() + " is missing");
  try {
    return json::parse(read_file(path));
  } catch (const json::exception& e) {
    // Damage, like a failed checksum: the error may point to best/.
    throw IntegrityError(path.string() + " is not valid JSON (" + e.what() +
                         "): the file is truncated or corrupted");
  }
}

constexpr const char* kState = "state.json";
// 3: the checksum over Python's canonical form; 2: with "files" and "checksum", its floats
// printed as nlohmann prints them; 1: before checksums.
constexpr int kStateFormat = 3;

// state.json's own checksum: XXH3-64 of the document without its "checksum" key, written
// compactly with sorted keys, as Python's json.dumps writes it (data/io/canonical_json.h).
// Format 2 hashed nlohmann's dump(), which differs from Python's on some floats.
std::string state_checksum(json doc) {
  doc.erase("checksum");
  const bool format_2 = doc.contains("format") && doc["format"] == 2;
  return checksum_hex(format_2 ? doc.dump() : canonical_json(doc));
}

// The files staged so far, each with its checksum: state.json's manifest of its checkpoint.
// `known`: the checksums of files whose bytes were hashed as they were written.
json manifest_of(const fs::path& dir, const std::map<std::string, std::string>& known) {
  json files = json::object();
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (!entry.is_regular_file()) continue;
    const std::string name = entry.path().filename().string();
    const auto it = known.find(name);
    files[name] = it != known.end() ? it->second : checksum_hex(read_file(entry.path()));
  }
  return files;
}

// One line per run directory and process: its files cannot be checked.
void notice_unverified(const fs::path& dir) {
  static std::mutex mutex;
  static std::set<std::string> told;
  std::lock_guard<std::mutex> lock(mutex);
  if (told.insert(fs::absolute(dir).lexically_normal().string()).second) {
    spdlog::warn(
        "{} was written before tinylm checksummed its checkpoints: its files load unverified "
        "(its next checkpoint adds the checksums)",
        dir.string());
  }
}

// state.json, checked against its own checksum. Only a document of format 1, from before
// checksums, may lack one: returned as it is, with a notice. From format 2 on a missing
// checksum is damage (a flipped byte in the key's name), never a reason to trust the files.
json read_state(const fs::path& dir) {
  const fs::path path = dir / kState;
  json doc = read_json(path);
  if (!doc.is_object()) throw IntegrityError(path.string() + " is not a JSON object");
  if (!doc.contains("checksum")) {
    if (doc.contains("format") && doc["format"] == 1) {
      notice_unverified(dir);
      return doc;
    }
    const std::string format = doc.contains("format") ? doc["format"].dump() : "(missing)";
    throw IntegrityError(path.string() + " has no \"checksum\": format " + format +
                         " requires one (only format 1, from before checksums, has none); the "
                         "file is corrupted");
  }
  const json& recorded = doc["checksum"];
  const std::string computed = state_checksum(doc);
  if (!recorded.is_string() || recorded.get<std::string>() != computed) {
    throw IntegrityError(path.string() + " fails its checksum (" + kChecksumAlgorithm + " " +
                         computed + ", recorded " + recorded.dump() + "): the file is corrupted");
  }
  if (!doc.contains("files") || !doc["files"].is_object()) {
    throw IntegrityError(path.string() + " has a checksum but no \"files\" manifest");
  }
  return doc;
}

// The checkpoint's files and their checksums, as state.json lists them; empty for a run
// from before checksums, or without a state.json.
std::map<std::string, std::string> checkpoint_files(const fs::path& dir) {
  std::map<std::string, std::string> files;
  if (!fs::exists(dir / kState)) return files;
  const json doc = read_state(dir);
  if (!doc.contains("files")) return files;
  for (const auto& [name, checksum] : doc["files"].items()) {
    if (!checksum.is_string()) {
      throw IntegrityError((dir / kState).string() + ": the checksum of " + name +
                           " is not a string: the file is corrupted");
    }
    files[name] = checksum.get<std::string>();
  }
  return files;
}

// The bytes of one file of the checkpoint in `dir`, checked against state.json. For a
// safetensors file whose bytes fail, the tensor that fails is named when one does.
std::string read_checkpoint_file(const fs::path& dir, const std::string& name) {
  const fs::path path = dir / name;
  if (!fs::exists(path)) throw std::runtime_error(path.string() + " is missing");
  std::string bytes = read_file(path);
  if (!fs::exists(dir / kState)) {
    notice_unverified(dir);
    return bytes;
  }
  const json state = read_state(dir);
  if (!state.contains("files")) return bytes;  // from before checksums: noticed already
  if (!state["files"].contains(name) || !state["files"][name].is_string()) {
    throw IntegrityError((dir / kState).string() + " records no checksum for " + name +
                         ": the checkpoint is incomplete or state.json is corrupted");
  }
  const std::string recorded = state["files"][name].get<std::string>();
  const std::string computed = checksum_hex(bytes);
  if (computed == recorded) return bytes;
  if (path.extension() == ".safetensors") decode_safetensors(bytes, path.string());
  throw IntegrityError(path.string() + " fails its checksum (" + kChecksumAlgorithm + " " +
                       computed + ", recorded " + recorded + " in state.json)" +
                       (path.extension() == ".safetensors"
                            ? ": every tensor is intact, so its header is corrupted"
                            : ": the file is corrupted"));
}

// "; DIR/best (step N) is intact: ..." when the run's best/ copy verifies; else "".
std::string best_hint(const fs::path& dir) {
  const fs::path best = dir / "best";
  if (dir.filename() == "best" || !fs::is_directory(best)) return "";
  try {
    const int64_t step = verify_checkpoint(best);
    return "; " + best.string() + " (step " + std::to_string(step) +
           ") is intact: sample or evaluate that, or copy its files over " + dir.string() +
           " to resume from it";
  } catch (const std::exception&) {
    return "";
  }
}

int64_t step_in(const Safetensors& file, const fs::path& path) {
  const auto it = file.metadata.find("step");
  if (it == file.metadata.end()) throw std::runtime_error(path.string() + " records no step");
  try {
    return std::stoll(it->second);
  } catch (const std::exception&) {
    throw std::runtime_error(path.string() + " records a malformed step \"" + it->second + "\"");
  }
}

std::string write_model(const fs::path& path, GPT& model, int64_t step) {
  NamedTensors tensors;
  for (const auto& item : model->named_parameters()) tensors.emplace_back(item.key(), item.value());
  return save_safetensors(
      path, tensors,
      {{"format", "pt"}, {"step", std::to_string(step)}, {"tinylm", TINYLM_VERSION}});
}

}  // namespace

int64_t load_weights(const fs::path& path, GPT& model) {
  const Safetensors file = decode_safetensors(
      read_checkpoint_file(path.parent_path(), path.filename().string()), path.string());
  torch::NoGradGuard no_grad;
  auto params = model->named_parameters();
  for (const auto& item : params) {
    const auto it = file.tensors.find(item.key());
    if (it == file.tensors.end()) {
      throw std::runtime_error(path.string() + " lacks " + item.key() + " (shape " +
                               c10::str(item.value().sizes()) + ") that config.json implies");
    }
    if (it->second.sizes() != item.value().sizes() || it->second.scalar_type() != torch::kFloat32) {
      throw std::runtime_error(path.string() + ": " + item.key() + " is " +
                               c10::toString(it->second.scalar_type()) + " " +
                               c10::str(it->second.sizes()) + " but config.json implies Float " +
                               c10::str(item.value().sizes()));
    }
    item.value().copy_(it->second);
  }
  for (const auto& [name, tensor] : file.tensors) {
    if (!params.contains(name)) {
      throw std::runtime_error(path.string() + " holds " + name +
                               ", which the model of config.json does not have");
    }
  }
  return file.metadata.count("step") ? step_in(file, path) : -1;
}

namespace {

json to_json(const ConfigValue& value) {
  return std::visit([](const auto& v) { return json(v); }, value);
}

// `doc` as a value of the same type as `like` (the key's default); nullopt when it is not one.
std::optional<ConfigValue> from_json(const json& doc, const ConfigValue& like) {
  if (std::holds_alternative<bool>(like) && doc.is_boolean()) return doc.get<bool>();
  if (std::holds_alternative<int64_t>(like) && doc.is_number_integer()) return doc.get<int64_t>();
  if (std::holds_alternative<double>(like) && doc.is_number()) return doc.get<double>();
  if (std::holds_alternative<std::string>(like) && doc.is_string()) return doc.get<std::string>();
  return std::nullopt;
}

const char* type_words(const ConfigValue& like) {
  if (std::holds_alternative<bool>(like)) return "a boolean";
  if (std::holds_alternative<int64_t>(like)) return "an integer";
  if (std::holds_alternative<double>(like)) return "a number";
  return "a string";
}

}  // namespace

json model_config_to_json(const ModelConfig& c) {
  // token_scale: what the token embeddings are multiplied by (model/positions.h), for
  // readers that compute the forward pass themselves.
  json doc = {{"vocab_size", c.vocab_size}, {"token_scale", c.positions().token_scale(c.n_embd)}};
  for (const ConfigKey<ModelConfig>& k : model_keys()) doc[k.name] = to_json(k.get(c));
  return doc;
}

ModelConfig model_config_from_json(const json& doc, const std::string& source) {
  if (!doc.is_object()) throw std::runtime_error(source + " is not a JSON object");
  const auto& required = gptconfig_keys();
  const auto missing_or_bad = [&](const std::string& name, const ConfigValue& like) {
    return std::runtime_error(source + ": \"" + name + "\" is missing or not " + type_words(like));
  };
  ModelConfig c;
  for (const ConfigKey<ModelConfig>& k : model_keys()) {
    const ConfigValue like = k.get(ModelConfig{});
    if (!doc.contains(k.name)) {
      // Keys that runs from before them lack take their defaults; nanoGPT's never do.
      if (std::find(required.begin(), required.end(), k.name) != required.end()) {
        throw missing_or_bad(k.name, like);
      }
      continue;
    }
    const std::optional<ConfigValue> value = from_json(doc[k.name], like);
    if (!value) throw missing_or_bad(k.name, like);
    try {
      k.set(c, *value);
    } catch (const std::invalid_argument& e) {
      throw std::runtime_error(source + ": model." + k.name + " " + e.what());
    }
  }
  if (!doc.contains("vocab_size") || !doc["vocab_size"].is_number_integer()) {
    throw missing_or_bad("vocab_size", ConfigValue(int64_t{0}));
  }
  c.vocab_size = doc["vocab_size"].get<int64_t>();
  try {
    c.validate();
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(source + ": " + e.what());
  }
  // A sinusoidal run from before the sqrt(C) token scale learned without it: loaded now, it
  // would compute something else, so it is refused rather than silently changed.
  if (c.positions().scales_tokens && !doc.contains("token_scale")) {
    throw std::runtime_error(source +
                             ": this sinusoidal run was trained before tinylm scaled "
                             "token embeddings by sqrt(n_embd); train it again");
  }
  return c;
}

std::string generator_state(torch::Generator& generator) {
  std::lock_guard<std::mutex> lock(generator.mutex());
  const torch::Tensor state = generator.get_state().contiguous();
  std::string hex;
  hex.reserve(static_cast<size_t>(state.numel()) * 2);
  const uint8_t* bytes = state.data_ptr<uint8_t>();
  char pair[3];
  for (int64_t i = 0; i < state.numel(); ++i) {
    std::snprintf(pair, sizeof pair, "%02x", bytes[i]);
    hex += pair;
  }
  return hex;
}

void set_generator_state(torch::Generator& generator, const std::string& hex,
                         const std::string& source) {
  if (hex.size() % 2 != 0 || hex.find_first_not_of("0123456789abcdef") != std::string::npos) {
    throw std::runtime_error(source + ": a generator state is not a hex string");
  }
  torch::Tensor state = torch::empty({static_cast<int64_t>(hex.size() / 2)}, torch::kUInt8);
  uint8_t* bytes = state.data_ptr<uint8_t>();
  for (size_t i = 0; i < hex.size() / 2; ++i) {
    bytes[i] = static_cast<uint8_t>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  }
  std::lock_guard<std::mutex> lock(generator.mutex());
  try {
    generator.set_state(state);
  } catch (const c10::Error&) {
    throw std::runtime_error(source + ": a generator state has the wrong size");
  }
}

namespace {

void write_checkpoint_files(const fs::path& dir, const RunConfig& config,
                            const Tokenizer& tokenizer, GPT& model,
                            const NamedTensors& optimizer_moments, const TrainingState& state);
LoadedRun load_checked_run(const fs::path& dir);

}  // namespace

void save_checkpoint(const fs::path& dir, const RunConfig& config, const Tokenizer& tokenizer,
                     GPT& model, const NamedTensors& optimizer_moments,
                     const TrainingState& state) {
  try {
    CheckpointTransaction transaction(dir);
    write_checkpoint_files(transaction.staging(), config, tokenizer, model, optimizer_moments,
                           state);
    transaction.commit();
  } catch (const std::exception& e) {
    throw std::runtime_error("the checkpoint of step " + std::to_string(state.step) +
                             " was not saved: " + e.what() + "; " + dir.string() +
                             " still holds a whole checkpoint, the one before");
  }
}

namespace {

// The files of one checkpoint, state.json (the manifest of the others) last.
void write_checkpoint_files(const fs::path& dir, const RunConfig& config,
                            const Tokenizer& tokenizer, GPT& model,
                            const NamedTensors& optimizer_moments, const TrainingState& state) {
  write_file_atomic(dir / "config.toml", to_toml(config));
  write_file_atomic(dir / "config.json", model_config_to_json(model->config()).dump(2) + "\n");
  tokenizer.save(dir);
  std::map<std::string, std::string> hashed;
  hashed["model.safetensors"] = write_model(dir / "model.safetensors", model, state.step);

  NamedTensors moments = optimizer_moments;
  moments.emplace_back("step", torch::tensor(state.step, torch::kInt64));
  hashed["optimizer.safetensors"] = save_safetensors(dir / "optimizer.safetensors", moments,
                                                     {{"step", std::to_string(state.step)}});

  json doc = {{"format", kStateFormat},
              {"step", state.step},
              {"last_eval_step", state.last_eval_step},
              {"best_val_loss",
               std::isfinite(state.best_val_loss) ? json(state.best_val_loss) : json(nullptr)},
              {"metrics_bytes", state.metrics_bytes},
              {"threads", state.threads},
              {"world_size", state.world_size},
              {"precision", {{"dtype", state.dtype}, {"reason", state.dtype_reason}}},
              // Dropout needs no saved state: it is seeded from (seed, step, rank) at every step.
              {"rng", {{"train_batches", state.train_rng}, {"eval_batches", state.eval_rng}}},
              {"data", {{"epoch", state.epoch.epoch}, {"epoch_position", state.epoch.position}}},
              {"phase_change", state.phase_change},
              {"versions", {{"tinylm", TINYLM_VERSION}, {"libtorch", TORCH_VERSION}}},
              {"files", manifest_of(dir, hashed)}};
  doc["checksum"] = state_checksum(doc);
  write_file_atomic(dir / kState, doc.dump(2) + "\n");
}

}  // namespace

int64_t verify_checkpoint(const fs::path& dir) {
  const CheckpointReadLock read_lock(dir);
  const std::map<std::string, std::string> files = checkpoint_files(dir);
  if (files.empty()) {
    throw IntegrityError(dir.string() +
                         " has no checksums to verify (no state.json, or one "
                         "from before checksums)");
  }
  for (const auto& [name, checksum] : files) {
    const std::string bytes = read_checkpoint_file(dir, name);
    if (fs::path(name).extension() == ".safetensors") {
      const Safetensors file = decode_safetensors(bytes, (dir / name).string());
      if (!file.checksummed && !file.tensors.empty()) {
        throw IntegrityError((dir / name).string() + " carries no tensor checksums");
      }
    }
  }
  return load_training_state(dir).step;
}

LoadedRun load_run(const fs::path& dir) {
  if (!fs::is_directory(dir)) throw std::runtime_error("run directory not found: " + dir.string());
  if (!fs::exists(dir / "config.json") || !fs::exists(dir / "model.safetensors")) {
    throw std::runtime_error(dir.string() +
                             " is not a tinylm run directory (it needs config.json and "
                             "model.safetensors; train one with `tinylm train CONFIG.toml`)");
  }
  try {
    return load_checked_run(dir);
  } catch (const IntegrityError& e) {
    rethrow_with_best_hint(e, dir);
  }
}

void rethrow_with_best_hint(const std::exception& error, const fs::path& dir) {
  throw IntegrityError(error.what() + best_hint(dir));
}

namespace {

LoadedRun load_checked_run(const fs::path& dir) {
  const CheckpointReadLock read_lock(dir);
  // The small files first (config, tokenizer); the weights are checked as they are read, and
  // the optimizer's moments, which sampling does not need, only on resume.
  for (const auto& [name, checksum] : checkpoint_files(dir)) {
    if (fs::path(name).extension() != ".safetensors") read_checkpoint_file(dir, name);
  }
  RunConfig config = load_run_config(dir / "config.toml");
  const ModelConfig model_config =
      model_config_from_json(read_json(dir / "config.json"), (dir / "config.json").string());
  ModelConfig from_toml = config.model;
  from_toml.vocab_size = model_config.vocab_size;
  if (model_config_to_json(from_toml) != model_config_to_json(model_config)) {
    throw std::runtime_error(dir.string() + ": config.toml and config.json disagree on the model");
  }
  config.model = model_config;
  std::shared_ptr<const Tokenizer> tokenizer = load_tokenizer(dir);
  if (tokenizer->vocab_size() != model_config.vocab_size) {
    throw std::runtime_error(
        dir.string() + ": its tokenizer has " + std::to_string(tokenizer->vocab_size()) +
        " ids but config.json says vocab_size " + std::to_string(model_config.vocab_size));
  }
  GPT model(model_config);
  load_weights(dir / "model.safetensors", model);
  // Weights that are not finite (a diverged run from elsewhere: tinylm's training stops
  // before it writes any) make every analysis fail deep inside LibTorch: say so here, once.
  for (const auto& item : model->named_parameters()) {
    const std::string& name = item.key();
    const torch::Tensor& tensor = item.value();
    const int64_t bad = (~torch::isfinite(tensor)).sum().item<int64_t>();
    if (bad == 0) continue;
    throw std::runtime_error(dir.string() + ": its weights are not finite (" + name + " has " +
                             std::to_string(bad) + " NaN or infinite value" +
                             (bad == 1 ? "" : "s") + " of " + std::to_string(tensor.numel()) +
                             "); the run diverged. Use an earlier checkpoint, such as its best/");
  }
  model->eval();
  return LoadedRun{std::move(config), std::move(tokenizer), std::move(model)};
}

}  // namespace

OptimizerFile load_optimizer(const fs::path& dir, int64_t expected_step, int64_t model_step) {
  const fs::path path = dir / "optimizer.safetensors";
  const Safetensors file =
      decode_safetensors(read_checkpoint_file(dir, "optimizer.safetensors"), path.string());
  const int64_t step = step_in(file, path);
  if (step != expected_step || model_step != expected_step) {
    throw std::runtime_error(
        dir.string() + ": checkpoint files are from different steps (state.json " +
        std::to_string(expected_step) + ", model.safetensors " + std::to_string(model_step) +
        ", optimizer.safetensors " + std::to_string(step) +
        "); a save was cut short. Resume from " + (dir / "best").string() + " instead");
  }
  return {file.tensors, step, path.string()};
}

TrainingState load_training_state(const fs::path& dir) {
  const fs::path path = dir / kState;
  const json doc = read_state(dir);
  TrainingState s;
  try {
    s.step = doc.at("step").get<int64_t>();
    s.last_eval_step = doc.at("last_eval_step").get<int64_t>();
    const json& best = doc.at("best_val_loss");
    s.best_val_loss = best.is_null() ? std::numeric_limits<double>::infinity() : best.get<double>();
    s.metrics_bytes = doc.at("metrics_bytes").get<uint64_t>();
    s.threads = doc.at("threads").get<int64_t>();
    s.train_rng = doc.at("rng").at("train_batches").get<std::string>();
    s.eval_rng = doc.at("rng").at("eval_batches").get<std::string>();
    s.world_size = doc.value("world_size", int64_t{1});
    if (doc.contains("precision")) {  // runs from before train.dtype = "auto" have none
      s.dtype = doc.at("precision").at("dtype").get<std::string>();
      s.dtype_reason = doc.at("precision").at("reason").get<std::string>();
    }
    s.phase_change = doc.value("phase_change", json(nullptr));  // none before the detector
    if (doc.contains("data")) {  // runs from before epoch sampling have none
      s.epoch.epoch = doc.at("data").at("epoch").get<int64_t>();
      s.epoch.position = doc.at("data").at("epoch_position").get<int64_t>();
    }
  } catch (const json::exception& e) {
    throw std::runtime_error(path.string() + " is malformed (" + e.what() + ")");
  }
  if (s.step < 0) throw std::runtime_error(path.string() + ": step is negative");
  return s;
}

}  // namespace tinylm
