#include "train/checkpoint.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <optional>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "data/io/atomic_file.h"
#include "data/io/files.h"
#include "train/safetensors.h"

namespace tinylm {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

json read_json(const fs::path& path) {
  if (!fs::exists(path)) throw std::runtime_error(path.string() + " is missing");
  try {
    return json::parse(read_file(path));
  } catch (const json::exception& e) {
    throw std::runtime_error(path.string() + " is not valid JSON (" + e.what() +
                             "): the file is truncated or corrupted");
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

void write_model(const fs::path& path, GPT& model, int64_t step) {
  NamedTensors tensors;
  for (const auto& item : model->named_parameters()) tensors.emplace_back(item.key(), item.value());
  save_safetensors(path, tensors,
                   {{"format", "pt"}, {"step", std::to_string(step)}, {"tinylm", TINYLM_VERSION}});
}

}  // namespace

int64_t load_weights(const fs::path& path, GPT& model) {
  const Safetensors file = load_safetensors(path);
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
  json doc = {{"vocab_size", c.vocab_size}};
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

void save_checkpoint(const fs::path& dir, const RunConfig& config, const Tokenizer& tokenizer,
                     GPT& model, const AdamW& optimizer, const TrainingState& state) {
  fs::create_directories(dir);
  write_file_atomic(dir / "config.toml", to_toml(config));
  write_file_atomic(dir / "config.json", model_config_to_json(model->config()).dump(2) + "\n");
  tokenizer.save(dir);
  write_model(dir / "model.safetensors", model, state.step);

  NamedTensors moments = optimizer.moments();
  moments.emplace_back("step", torch::tensor(state.step, torch::kInt64));
  save_safetensors(dir / "optimizer.safetensors", moments, {{"step", std::to_string(state.step)}});

  const json doc = {
      {"format", 1},
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
      {"versions", {{"tinylm", TINYLM_VERSION}, {"libtorch", TORCH_VERSION}}}};
  write_file_atomic(dir / "state.json", doc.dump(2) + "\n");
}

LoadedRun load_run(const fs::path& dir) {
  if (!fs::is_directory(dir)) throw std::runtime_error("run directory not found: " + dir.string());
  if (!fs::exists(dir / "config.json") || !fs::exists(dir / "model.safetensors")) {
    throw std::runtime_error(dir.string() +
                             " is not a tinylm run directory (it needs config.json and "
                             "model.safetensors; train one with `tinylm train CONFIG.toml`)");
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
  model->eval();
  return LoadedRun{std::move(config), std::move(tokenizer), std::move(model)};
}

void load_optimizer(const fs::path& dir, AdamW& optimizer, int64_t expected_step,
                    int64_t model_step) {
  const fs::path path = dir / "optimizer.safetensors";
  const Safetensors file = load_safetensors(path);
  const int64_t step = step_in(file, path);
  if (step != expected_step || model_step != expected_step) {
    throw std::runtime_error(
        dir.string() + ": checkpoint files are from different steps (state.json " +
        std::to_string(expected_step) + ", model.safetensors " + std::to_string(model_step) +
        ", optimizer.safetensors " + std::to_string(step) +
        "); a save was cut short. Resume from " + (dir / "best").string() + " instead");
  }
  optimizer.restore(file.tensors, step, path.string());
}

TrainingState load_training_state(const fs::path& dir) {
  const fs::path path = dir / "state.json";
  const json doc = read_json(path);
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
