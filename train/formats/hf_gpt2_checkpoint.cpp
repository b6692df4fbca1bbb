#include "train/formats/hf_gpt2_checkpoint.h"

#include <cmath>
#include <stdexcept>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/io/files.h"
#include "train/formats/shape_text.h"
#include "train/run/safetensors.h"

namespace tinylm {
namespace fs = std::filesystem;

namespace {

std::runtime_error bad(const fs::path& file, const std::string& what) {
  return std::runtime_error(file.string() + ": " + what);
}

// config.json's GPT2Config as tinylm's model; every option that would change the forward
// pass is refused by name.
ModelConfig model_of(const fs::path& file) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(read_file(file));
  } catch (const nlohmann::json::exception& e) {
    throw bad(file, std::string("not valid JSON (") + e.what() + ")");
  }
  if (!doc.is_object()) throw bad(file, "expected a JSON object (GPT2Config)");
  const std::string type = doc.value("model_type", std::string());
  if (type != "gpt2") {
    throw bad(file, "model_type is \"" + type +
                        "\": tinylm imports Hugging Face's gpt2 models (GPT2LMHeadModel: gpt2, "
                        "gpt2-medium, gpt2-large, gpt2-xl, distilgpt2 and their fine-tunes) and "
                        "nanoGPT's ckpt.pt");
  }
  const auto count = [&](std::initializer_list<const char*> names) {
    for (const char* name : names) {
      if (!doc.contains(name)) continue;
      if (!doc[name].is_number_integer() || doc[name].get<int64_t>() < 1)
        throw bad(file, std::string(name) + " is " + doc[name].dump() + ", not a positive integer");
      return doc[name].get<int64_t>();
    }
    throw bad(file, std::string("lacks ") + *names.begin());
  };
  ModelConfig c;
  c.n_layer = count({"n_layer"});
  c.n_head = count({"n_head"});
  c.n_embd = count({"n_embd"});
  c.block_size = count({"n_positions", "n_ctx"});
  c.vocab_size = count({"vocab_size"});
  c.bias = true;
  c.pos_encoding = PosEncoding::kLearned;
  c.norm = NormKind::kLayerNorm;
  c.tie_weights = doc.value("tie_word_embeddings", true);
  c.dropout = 0.0;  // GPT-2's 0.1 is for its pre-training; fine-tuning picks its own
  const std::string activation = doc.value("activation_function", std::string("gelu_new"));
  if (activation == "gelu_new" || activation == "gelu_pytorch_tanh" || activation == "gelu_fast") {
    c.mlp = MlpKind::kGeluTanh;  // three spellings of one formula
  } else if (activation == "gelu") {
    c.mlp = MlpKind::kGelu;
  } else {
    throw bad(file, "activation_function \"" + activation +
                        "\" is not one tinylm has (gelu_new, gelu_pytorch_tanh, gelu_fast, gelu)");
  }
  const auto refuse_unless = [&](bool ok, const std::string& what) {
    if (!ok) throw bad(file, what + ": tinylm's GPT-2 block has no such option");
  };
  const double eps = doc.value("layer_norm_epsilon", 1e-5);
  refuse_unless(std::abs(eps - 1e-5) <= 1e-12,
                "layer_norm_epsilon is " + doc["layer_norm_epsilon"].dump() + ", not 1e-5");
  refuse_unless(
      !doc.contains("n_inner") || doc["n_inner"].is_null() || doc["n_inner"] == 4 * c.n_embd,
      "n_inner is " + doc.value("n_inner", nlohmann::json()).dump() + ", not 4 n_embd");
  refuse_unless(doc.value("scale_attn_weights", true), "scale_attn_weights is false");
  refuse_unless(!doc.value("scale_attn_by_inverse_layer_idx", false),
                "scale_attn_by_inverse_layer_idx is true");
  refuse_unless(!doc.value("add_cross_attention", false), "add_cross_attention is true");
  try {
    c.validate();
  } catch (const std::invalid_argument& e) {
    throw bad(file, e.what());
  }
  return c;
}

struct Expected {
  std::string name;            // tinylm's
  std::vector<int64_t> shape;  // as Hugging Face stores it
  bool transpose;              // a Conv1D weight
};

// Hugging Face's name (without "transformer.") -> what tinylm makes of it.
std::map<std::string, Expected> expected_tensors(const ModelConfig& c) {
  const int64_t C = c.n_embd, V = c.vocab_size;
  std::map<std::string, Expected> out = {
      {"wte.weight", {"transformer.wte.weight", {V, C}, false}},
      {"wpe.weight", {"transformer.wpe.weight", {c.block_size, C}, false}},
      {"ln_f.weight", {"transformer.ln_f.weight", {C}, false}},
      {"ln_f.bias", {"transformer.ln_f.bias", {C}, false}}};
  if (!c.tie_weights) out["lm_head.weight"] = {"lm_head.weight", {V, C}, false};
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string h = "h." + std::to_string(l) + ".";
    for (const auto& [name, shape, transpose] :
         std::vector<std::tuple<std::string, std::vector<int64_t>, bool>>{
             {"ln_1.weight", {C}, false},
             {"ln_1.bias", {C}, false},
             {"attn.c_attn.weight", {C, 3 * C}, true},
             {"attn.c_attn.bias", {3 * C}, false},
             {"attn.c_proj.weight", {C, C}, true},
             {"attn.c_proj.bias", {C}, false},
             {"ln_2.weight", {C}, false},
             {"ln_2.bias", {C}, false},
             {"mlp.c_fc.weight", {C, 4 * C}, true},
             {"mlp.c_fc.bias", {4 * C}, false},
             {"mlp.c_proj.weight", {4 * C, C}, true},
             {"mlp.c_proj.bias", {C}, false}}) {
      out[h + name] = {"transformer." + h + name, shape, transpose};
    }
  }
  return out;
}

bool is_mask_buffer(const std::string& name) {
  const auto ends = [&](const std::string& tail) {
    return name.size() > tail.size() &&
           name.compare(name.size() - tail.size(), tail.size(), tail) == 0;
  };
  return name.rfind("h.", 0) == 0 && (ends(".attn.bias") || ends(".attn.masked_bias"));
}

std::map<std::string, torch::Tensor> weights_of(const fs::path& file, const ModelConfig& c) {
  if (!fs::is_regular_file(file)) {
    const fs::path dir = file.parent_path();
    if (fs::exists(dir / "model.safetensors.index.json"))
      throw bad(dir / "model.safetensors.index.json",
                "sharded weights are not read; save the model in one model.safetensors");
    throw std::runtime_error(file.string() + " is missing" +
                             (fs::exists(dir / "pytorch_model.bin")
                                  ? " (only safetensors is read, not pytorch_model.bin: save it "
                                    "with save_pretrained(dir, safe_serialization=True))"
                                  : ""));
  }
  Safetensors st = load_safetensors(file);
  std::map<std::string, Expected> expected = expected_tensors(c);
  std::map<std::string, torch::Tensor> out;
  for (auto& [stored, tensor] : st.tensors) {
    std::string name = stored;
    if (name.rfind("transformer.", 0) == 0) name = name.substr(12);
    if (is_mask_buffer(name)) continue;
    if (name == "lm_head.weight" && c.tie_weights) continue;  // wte again
    const auto it = expected.find(name);
    if (it == expected.end())
      throw bad(file, "holds " + stored + ", which is not a tensor of GPT-2's");
    if (tensor.sizes().vec() != it->second.shape) {
      throw bad(file, stored + " is " + shape_text(tensor.sizes()) + ", but config.json's " +
                          "model needs " + shape_text(it->second.shape));
    }
    if (!tensor.is_floating_point()) throw bad(file, stored + " is not a floating-point tensor");
    torch::Tensor w = tensor.to(torch::kFloat32);
    out[it->second.name] = it->second.transpose ? w.t().contiguous() : w;
    expected.erase(it);
  }
  if (!expected.empty()) {
    throw bad(file, "lacks " + expected.begin()->first + " (and " +
                        std::to_string(expected.size() - 1) +
                        " more) that config.json's model has");
  }
  return out;
}

}  // namespace

HfGpt2Checkpoint read_hf_gpt2(const fs::path& dir) {
  if (!fs::is_regular_file(dir / "config.json"))
    throw std::runtime_error(dir.string() +
                             " has no config.json: not a Hugging Face model directory");
  HfGpt2Checkpoint out;
  out.model = model_of(dir / "config.json");
  for (const char* name : {"vocab.json", "merges.txt"}) {
    if (!fs::is_regular_file(dir / name))
      throw std::runtime_error((dir / name).string() +
                               " is missing: GPT-2's tokenizer is vocab.json and merges.txt beside "
                               "config.json (download them with the weights)");
  }
  out.tokenizer = Gpt2Tokenizer::from_files(dir / "vocab.json", dir / "merges.txt");
  if (out.tokenizer->vocab_size() != out.model.vocab_size) {
    throw std::runtime_error(
        (dir / "vocab.json").string() + " has " + std::to_string(out.tokenizer->vocab_size()) +
        " tokens, config.json's " + "vocab_size is " + std::to_string(out.model.vocab_size));
  }
  out.weights = weights_of(dir / "model.safetensors", out.model);
  return out;
}

}  // namespace tinylm
