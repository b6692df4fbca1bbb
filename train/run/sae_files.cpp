#include "train/run/sae_files.h"

#include <stdexcept>

#include "data/io/atomic_file.h"
#include "data/io/files.h"

namespace tinylm {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kConfig = "cfg.json";
constexpr const char* kWeights = "sae_weights.safetensors";
constexpr const char* kMetrics = "metrics.json";
constexpr const char* kProgress = "training.safetensors";

json read_json_file(const fs::path& path) {
  if (!fs::exists(path)) throw std::runtime_error(path.string() + " is missing");
  try {
    return json::parse(read_file(path));
  } catch (const json::exception& e) {
    throw std::runtime_error(path.string() + " is not valid JSON (" + e.what() + ")");
  }
}

const torch::Tensor& tensor(const Safetensors& file, const std::string& name, const fs::path& path) {
  const auto it = file.tensors.find(name);
  if (it == file.tensors.end()) throw std::runtime_error(path.string() + " has no tensor " + name);
  return it->second;
}

NamedTensors weights(const SparseAutoencoder& sae) {
  return {{"W_enc", sae.W_enc.detach()}, {"W_dec", sae.W_dec.detach()},
          {"b_enc", sae.b_enc.detach()}, {"b_dec", sae.b_dec.detach()}};
}

SparseAutoencoder sae_from(const Safetensors& file, const SaeShape& shape, const fs::path& path) {
  try {
    return SparseAutoencoder(shape, tensor(file, "W_enc", path), tensor(file, "W_dec", path),
                             tensor(file, "b_enc", path), tensor(file, "b_dec", path));
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(path.string() + ": " + e.what());
  }
}

}  // namespace

fs::path sae_directory(const fs::path& run_dir, const std::string& hook, const SaeShape& shape) {
  return run_dir / "saes" /
         (hook + "-w" + std::to_string(shape.width) + "-k" + std::to_string(shape.k));
}

json sae_config_json(const SparseAutoencoder& sae, const SaeOrigin& origin) {
  // SAELens's pre-6.0 layout, which every SAELens since reads (6.x converts it).
  json cfg = {{"architecture", "topk"},
              {"d_in", sae.shape.d_in},
              {"d_sae", sae.shape.width},
              {"activation_fn_str", "topk"},
              {"activation_fn_kwargs", {{"k", sae.shape.k}}},
              {"apply_b_dec_to_input", true},
              {"finetuning_scaling_factor", false},
              {"normalize_activations", "none"},
              {"dtype", "float32"},
              {"device", "cpu"},
              {"model_name", origin.model_name},
              {"hook_name", origin.hook},
              {"hook_layer", origin.hook_layer},
              {"hook_head_index", nullptr},
              {"context_size", origin.context_size},
              {"prepend_bos", false},
              {"dataset_path", origin.dataset},
              {"sae_lens_training_version", nullptr},
              {"trained_by", std::string("tinylm ") + TINYLM_VERSION}};
  if (origin.per_head) cfg["reshape_activations"] = "hook_z";
  return cfg;
}

void save_sae(const fs::path& dir, const SparseAutoencoder& sae, const SaeOrigin& origin,
              const json& metrics) {
  save_safetensors(dir / kWeights, weights(sae));
  write_file_atomic(dir / kConfig, sae_config_json(sae, origin).dump(2) + "\n");
  write_file_atomic(dir / kMetrics, metrics.dump(2) + "\n");
}

void save_sae_progress(const fs::path& dir, const SparseAutoencoder& sae, const SaeProgress& p) {
  NamedTensors tensors = weights(sae);
  tensors.emplace_back("last_fired", p.last_fired);
  for (const auto& moment : p.moments) tensors.push_back(moment);
  const std::map<std::string, std::string> metadata = {
      {"tokens_done", std::to_string(p.tokens_done)},
      {"tokens_total", std::to_string(p.tokens_total)},
      {"steps", std::to_string(p.steps)},
      {"adam_steps", std::to_string(p.adam_steps)},
      {"seconds", std::to_string(p.seconds)},
      {"rng", p.rng},
      {"options", p.options.dump()},
      {"k", std::to_string(sae.shape.k)}};
  save_safetensors(dir / kProgress, tensors, metadata);
}

bool has_sae_progress(const fs::path& dir) { return fs::exists(dir / kProgress); }

LoadedSae load_sae(const fs::path& dir) {
  if (!fs::is_directory(dir)) {
    throw std::runtime_error("no SAE at " + dir.string() +
                             " (a directory with cfg.json and sae_weights.safetensors, as "
                             "`tinylm features` writes)");
  }
  const json cfg = read_json_file(dir / kConfig);
  const fs::path source = dir / kConfig;
  try {
    const std::string architecture = cfg.value("architecture", std::string("standard"));
    if (architecture != "topk") {
      throw std::runtime_error("its architecture is \"" + architecture +
                               "\"; tinylm reads TopK SAEs (\"topk\")");
    }
    SaeShape shape{cfg.at("d_in").get<int64_t>(), cfg.at("d_sae").get<int64_t>(),
                   cfg.at("activation_fn_kwargs").at("k").get<int64_t>()};
    const fs::path weights_path = dir / kWeights;
    SparseAutoencoder sae = sae_from(load_safetensors(weights_path), shape, weights_path);
    SaeOrigin origin;
    origin.hook = cfg.at("hook_name").get<std::string>();
    origin.hook_layer = cfg.value("hook_layer", int64_t{-1});
    origin.model_name = cfg.value("model_name", std::string());
    origin.dataset = cfg.value("dataset_path", std::string());
    origin.context_size = cfg.value("context_size", int64_t{0});
    origin.per_head = cfg.value("reshape_activations", std::string()) == "hook_z";
    const json metrics = fs::exists(dir / kMetrics) ? read_json_file(dir / kMetrics) : json();
    return {std::move(sae), origin, metrics};
  } catch (const json::exception& e) {
    throw std::runtime_error(source.string() + ": " + e.what());
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(source.string() + ": " + e.what());
  }
}

ResumedSae load_sae_progress(const fs::path& dir) {
  const fs::path path = dir / kProgress;
  if (!fs::exists(path)) throw std::runtime_error(path.string() + " is missing: nothing to resume");
  const Safetensors file = load_safetensors(path);
  const auto number = [&](const std::string& key) {
    const auto it = file.metadata.find(key);
    if (it == file.metadata.end()) throw std::runtime_error(path.string() + " records no " + key);
    return std::stod(it->second);
  };
  const torch::Tensor& W_enc = tensor(file, "W_enc", path);
  if (W_enc.dim() != 2) throw std::runtime_error(path.string() + ": W_enc is not a matrix");
  const SaeShape shape{W_enc.size(0), W_enc.size(1), static_cast<int64_t>(number("k"))};
  ResumedSae out{sae_from(file, shape, path), {}};
  SaeProgress& p = out.progress;
  p.tokens_done = static_cast<int64_t>(number("tokens_done"));
  p.tokens_total = static_cast<int64_t>(number("tokens_total"));
  p.steps = static_cast<int64_t>(number("steps"));
  p.adam_steps = static_cast<int64_t>(number("adam_steps"));
  p.seconds = number("seconds");
  p.rng = file.metadata.at("rng");
  p.options = json::parse(file.metadata.at("options"));
  p.last_fired = tensor(file, "last_fired", path).clone();
  for (const auto& [name, t] : file.tensors) {
    if (name.rfind("exp_avg", 0) == 0) p.moments.emplace_back(name, t.clone());
  }
  return out;
}

}  // namespace tinylm
