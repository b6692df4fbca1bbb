#include "train/formats/nanogpt_checkpoint.h"

#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/pickle.h>
#include <torch/serialize.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <stdexcept>

#include "data/io/atomic_file.h"
#include "data/io/files.h"
#include "train/formats/readable_pickle.h"
#include "train/formats/shape_text.h"

namespace tinylm {
namespace fs = std::filesystem;
using c10::IValue;

namespace {

constexpr const char* kCompilePrefix = "_orig_mod.";

[[noreturn]] void fail(const fs::path& path, const std::string& what) {
  throw std::runtime_error(path.string() + ": " + what);
}

// The first line of a LibTorch error, without its C++ backtrace.
std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

std::string kind_of(const IValue& v) { return v.tagKind(); }

const IValue& entry(const fs::path& path, const c10::impl::GenericDict& dict,
                    const std::string& key, const std::string& where) {
  const auto it = dict.find(IValue(key));
  if (it == dict.end()) fail(path, where + " has no '" + key + "'");
  return it->value();
}

int64_t as_int(const fs::path& path, const IValue& v, const std::string& what) {
  if (v.isInt()) return v.toInt();
  if (v.isTensor() && v.toTensor().numel() == 1) return v.toTensor().item<int64_t>();
  if (v.isDouble() && v.toDouble() == std::floor(v.toDouble()))
    return static_cast<int64_t>(v.toDouble());
  fail(path, what + " is a " + kind_of(v) + ", not an integer");
}

double as_double(const fs::path& path, const IValue& v, const std::string& what) {
  if (v.isDouble()) return v.toDouble();
  if (v.isInt()) return static_cast<double>(v.toInt());
  if (v.isTensor() && v.toTensor().numel() == 1) return v.toTensor().item<double>();
  fail(path, what + " is a " + kind_of(v) + ", not a number");
}

c10::impl::GenericDict as_dict(const fs::path& path, const IValue& v, const std::string& what) {
  if (!v.isGenericDict()) fail(path, what + " is a " + kind_of(v) + ", not a dict");
  return v.toGenericDict();
}

// GPTConfig's fields, the only keys nanoGPT's model_args hold.
ModelConfig model_from_args(const fs::path& path, const c10::impl::GenericDict& args) {
  ModelConfig c;
  for (const auto& item : args) {
    const std::string key = item.key().isString() ? item.key().toStringRef() : "?";
    const IValue& v = item.value();
    const std::string what = "model_args['" + key + "']";
    if (key == "n_layer")
      c.n_layer = as_int(path, v, what);
    else if (key == "n_head")
      c.n_head = as_int(path, v, what);
    else if (key == "n_embd")
      c.n_embd = as_int(path, v, what);
    else if (key == "block_size")
      c.block_size = as_int(path, v, what);
    else if (key == "vocab_size")
      c.vocab_size = as_int(path, v, what);
    else if (key == "dropout")
      c.dropout = as_double(path, v, what);
    else if (key == "bias") {
      if (!v.isBool()) fail(path, what + " is a " + kind_of(v) + ", not a bool");
      c.bias = v.toBool();
    } else {
      fail(path, "model_args has '" + key +
                     "', which nanoGPT's GPTConfig lacks: only nanoGPT's GPT-2 block is read "
                     "(n_layer, n_head, n_embd, block_size, bias, vocab_size, dropout)");
    }
  }
  for (const char* key : {"n_layer", "n_head", "n_embd", "block_size", "vocab_size"})
    entry(path, args, key, "model_args");
  try {
    c.validate();
  } catch (const std::invalid_argument& e) {
    fail(path, std::string("model_args: ") + e.what());
  }
  return c;
}

// nanoGPT's AdamW groups: the decayed parameters (dim >= 2) in named_parameters order, then
// the rest. The same order as tinylm's names (the modules are registered alike).
std::vector<std::string> optimizer_order(GPT& model) {
  std::vector<std::string> decayed, rest;
  for (const auto& item : model->named_parameters())
    (item.value().dim() >= 2 ? decayed : rest).push_back(item.key());
  decayed.insert(decayed.end(), rest.begin(), rest.end());
  return decayed;
}

void read_optimizer(const fs::path& path, const IValue& value, GPT& model, NanoGptCheckpoint& out) {
  const c10::impl::GenericDict opt = as_dict(path, value, "optimizer");
  const c10::impl::GenericDict state =
      as_dict(path, entry(path, opt, "state", "optimizer"), "optimizer['state']");
  const IValue& groups = entry(path, opt, "param_groups", "optimizer");
  if (!groups.isList()) fail(path, "optimizer['param_groups'] is not a list");
  std::vector<int64_t> indices;
  for (const IValue& group : groups.toListRef()) {
    const IValue& params =
        entry(path, as_dict(path, group, "a param group"), "params", "a param group");
    if (!params.isList()) fail(path, "a param group's params is not a list");
    for (const IValue& i : params.toListRef()) indices.push_back(as_int(path, i, "a param index"));
  }
  const std::vector<std::string> names = optimizer_order(model);
  if (indices.size() != names.size()) {
    fail(path, "the optimizer holds " + std::to_string(indices.size()) + " parameters, the model " +
                   std::to_string(names.size()));
  }
  if (state.size() == 0) return;  // never stepped: no moments
  const auto params = model->named_parameters();
  for (size_t k = 0; k < names.size(); ++k) {
    const auto it = state.find(IValue(indices[k]));
    const torch::Tensor& p = params[names[k]];
    torch::Tensor m = torch::zeros_like(p), v = torch::zeros_like(p);
    if (it != state.end()) {
      const c10::impl::GenericDict s = as_dict(path, it->value(), "optimizer state");
      const std::string where = "the optimizer state of " + names[k];
      out.optimizer_steps = std::max(
          out.optimizer_steps, as_int(path, entry(path, s, "step", where), where + "'s step"));
      for (auto [key, into] : {std::pair<const char*, torch::Tensor*>{"exp_avg", &m},
                               std::pair<const char*, torch::Tensor*>{"exp_avg_sq", &v}}) {
        const IValue& t = entry(path, s, key, where);
        if (!t.isTensor() || t.toTensor().sizes() != p.sizes()) {
          fail(path, where + "'s " + key + " is " +
                         (t.isTensor() ? shape_text(t.toTensor().sizes()) : kind_of(t)) +
                         ", the parameter " + shape_text(p.sizes()));
        }
        *into = t.toTensor().to(torch::kFloat32).contiguous();
      }
    }
    out.moments["exp_avg." + names[k]] = m;
    out.moments["exp_avg_sq." + names[k]] = v;
  }
}

// A scalar of train.py's config as a TOML value; nullopt for what TOML cannot say here.
std::optional<std::string> toml_scalar(const IValue& v) {
  if (v.isBool()) return std::string(v.toBool() ? "true" : "false");
  if (v.isInt()) return std::to_string(v.toInt());
  if (v.isDouble()) {
    char text[32];
    std::snprintf(text, sizeof text, "%.17g", v.toDouble());
    std::string s = text;
    if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
    return s;
  }
  if (v.isString()) return "\"" + v.toStringRef() + "\"";
  return std::nullopt;
}

// A torch.save zip whose data.pkl LibTorch 1.13 reads (readable_pickle, OrderedDict states
// dropped), the other records (the tensors' bytes) as they were.
// Refuses what is not a whole zip before LibTorch's reader sees it: a file that does not
// start as a zip, or whose end-of-central-directory record (the last 22 bytes, or up to 64 KB
// more with a comment) is missing or points outside the file. Besides the clearer message,
// LibTorch 1.13's reader leaks its miniz state on such files (tests/sanitizers/lsan.supp).
void check_whole_zip(const std::string& bytes, const fs::path& path) {
  const auto u32 = [&](size_t at) {
    uint32_t v = 0;
    for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(bytes[at + i]);
    return v;
  };
  if (bytes.size() < 22 || bytes.compare(0, 4, "PK\x03\x04") != 0) {
    fail(path, "not a torch.save file (not a zip archive; nanoGPT's ckpt.pt is one)");
  }
  const size_t lowest = bytes.size() > 22 + 65535 ? bytes.size() - 22 - 65535 : 0;
  for (size_t at = bytes.size() - 22;; --at) {
    if (bytes.compare(at, 4, "PK\x05\x06") == 0) {
      const uint64_t size = u32(at + 12), offset = u32(at + 16);
      // 0xFFFFFFFF: ZIP64, whose own record says where the directory is.
      if (offset == 0xFFFFFFFFu || offset + size <= at) return;
    }
    if (at == lowest) break;
  }
  fail(path,
       "not a torch.save file: the zip archive is truncated (its central directory is "
       "missing)");
}

std::vector<char> readable_torch_save(const std::string& bytes, const fs::path& path) {
  check_whole_zip(bytes, path);
  std::istringstream stream(bytes);
  caffe2::serialize::PyTorchStreamReader reader(&stream);
  std::vector<char> out;
  caffe2::serialize::PyTorchStreamWriter writer([&](const void* data, size_t n) {
    out.insert(out.end(), static_cast<const char*>(data), static_cast<const char*>(data) + n);
    return n;
  });
  for (const std::string& name : reader.getAllRecords()) {
    if (name == "version" || name == ".data/version") continue;  // the writer adds its own
    const auto [data, size] = reader.getRecord(name);
    const auto* begin = static_cast<const char*>(data.get());
    if (name == "data.pkl") {
      const std::string pickle =
          readable_pickle(std::string(begin, size), path, PickleSource::kTorchArchive);
      writer.writeRecord(name, pickle.data(), pickle.size());
    } else {
      writer.writeRecord(name, begin, size);
    }
  }
  writer.writeEndOfFile();
  return out;
}

}  // namespace

NanoGptCheckpoint read_nanogpt_checkpoint(const fs::path& path) {
  const std::string bytes = read_file(path);
  IValue loaded;
  try {
    loaded = torch::pickle_load(readable_torch_save(bytes, path));
  } catch (const c10::Error& e) {
    fail(path, "not a torch.save file that LibTorch can read (nanoGPT's ckpt.pt is one): " +
                   first_line(e.what_without_backtrace()));
  } catch (const std::logic_error& e) {  // LibTorch's unpickler: a memo index out of range
    fail(path, std::string("not a torch.save file that LibTorch can read: ") + e.what());
  }
  if (!loaded.isGenericDict()) {
    fail(path, "holds a " + kind_of(loaded) +
                   ", not the dict of nanoGPT's ckpt.pt (model, model_args, iter_num, "
                   "best_val_loss, config)");
  }
  const c10::impl::GenericDict doc = loaded.toGenericDict();
  NanoGptCheckpoint out;
  out.model = model_from_args(
      path, as_dict(path, entry(path, doc, "model_args", "the checkpoint"), "model_args"));
  out.iter_num = as_int(path, entry(path, doc, "iter_num", "the checkpoint"), "iter_num");
  out.best_val_loss =
      as_double(path, entry(path, doc, "best_val_loss", "the checkpoint"), "best_val_loss");

  // The state dict, without torch.compile's prefix and the causal masks.
  std::map<std::string, torch::Tensor> weights;
  for (const auto& item : as_dict(path, entry(path, doc, "model", "the checkpoint"), "model")) {
    std::string name = item.key().isString() ? item.key().toStringRef() : "?";
    if (name.rfind(kCompilePrefix, 0) == 0) name = name.substr(std::string(kCompilePrefix).size());
    if (!item.value().isTensor()) fail(path, "model['" + name + "'] is not a tensor");
    const torch::Tensor t = item.value().toTensor();
    const bool mask =
        name.size() > 10 && name.compare(name.size() - 10, 10, ".attn.bias") == 0 && t.dim() == 4;
    if (!mask) weights[name] = t;
  }
  // lm_head.weight is the token embedding again when tied, nanoGPT's only layout.
  const auto head = weights.find("lm_head.weight");
  const auto wte = weights.find("transformer.wte.weight");
  if (head != weights.end() && wte != weights.end() &&
      head->second.sizes() == wte->second.sizes() && torch::equal(head->second, wte->second)) {
    weights.erase(head);
  } else if (head != weights.end()) {
    out.model.tie_weights = false;
  }
  GPT model(out.model);
  const auto expected = model->named_parameters();
  for (const auto& item : expected) {
    const auto it = weights.find(item.key());
    if (it == weights.end()) fail(path, "the state dict has no " + item.key());
    if (it->second.sizes() != item.value().sizes()) {
      fail(path, item.key() + " is " + shape_text(it->second.sizes()) + ", model_args imply " +
                     shape_text(item.value().sizes()));
    }
    if (!it->second.is_floating_point()) fail(path, item.key() + " is not floating point");
    out.weights[item.key()] = it->second.to(torch::kFloat32).contiguous();
  }
  for (const auto& [name, t] : weights) {
    if (!expected.contains(name))
      fail(path, "the state dict has " + name + ", which nanoGPT's GPT lacks");
  }
  if (const auto opt = doc.find(IValue("optimizer")); opt != doc.end() && !opt->value().isNone())
    read_optimizer(path, opt->value(), model, out);
  if (const auto cfg = doc.find(IValue("config"));
      cfg != doc.end() && cfg->value().isGenericDict()) {
    for (const auto& item : cfg->value().toGenericDict()) {
      if (!item.key().isString()) continue;
      if (const auto value = toml_scalar(item.value()))
        out.config[item.key().toStringRef()] = *value;
    }
  }
  return out;
}

std::vector<std::string> read_nanogpt_meta(const fs::path& path) {
  std::string bytes = read_file(path);
  bytes = readable_pickle(bytes, path, PickleSource::kPlain);
  IValue loaded;
  try {
    loaded = torch::jit::unpickle(bytes.data(), bytes.size());
  } catch (const c10::Error& e) {
    fail(path, "not a pickle LibTorch can read (nanoGPT's meta.pkl is one): " +
                   first_line(e.what_without_backtrace()));
  } catch (const std::logic_error& e) {  // LibTorch's unpickler: a memo index out of range
    fail(path, std::string("not a pickle LibTorch can read: ") + e.what());
  }
  const c10::impl::GenericDict itos =
      as_dict(path, entry(path, as_dict(path, loaded, "meta.pkl"), "itos", "meta.pkl"), "itos");
  std::vector<std::string> out(itos.size());
  for (const auto& item : itos) {
    const int64_t id = as_int(path, item.key(), "an id of itos");
    if (id < 0 || id >= static_cast<int64_t>(out.size()) || !item.value().isString())
      fail(path,
           "itos is not a map from the ids 0 .. " + std::to_string(out.size() - 1) + " to text");
    out[static_cast<size_t>(id)] = item.value().toStringRef();
  }
  return out;
}

std::vector<std::string> nanogpt_incompatibilities(const ModelConfig& c) {
  std::vector<std::string> out;
  const auto name = [](auto value) { return std::string("\"") + name_of(value) + "\""; };
  if (c.pos_encoding != PosEncoding::kLearned)
    out.push_back("model.pos_encoding = " + name(c.pos_encoding) + " (nanoGPT's are learned)");
  if (c.norm != NormKind::kLayerNorm)
    out.push_back("model.norm = " + name(c.norm) + " (nanoGPT's is layernorm)");
  if (c.mlp != MlpKind::kGelu) out.push_back("model.mlp = " + name(c.mlp) + " (nanoGPT's is gelu)");
  if (c.kv_heads() != c.n_head)
    out.push_back("model.n_kv_head = " + std::to_string(c.n_kv_head) + " (nanoGPT has none)");
  if (c.attn_only) out.push_back("model.attn_only = true (nanoGPT's blocks have an MLP)");
  if (!c.tie_weights) out.push_back("model.tie_weights = false (nanoGPT ties lm_head to wte)");
  return out;
}

void write_nanogpt_checkpoint(const fs::path& path, GPT& model, const RunConfig& config,
                              const std::map<std::string, torch::Tensor>& moments,
                              int64_t optimizer_steps, int64_t iter_num, double best_val_loss,
                              const std::string& dataset, bool mask_buffers) {
  const ModelConfig& c = model->config();
  if (const auto problems = nanogpt_incompatibilities(c); !problems.empty()) {
    std::string list;
    for (const std::string& p : problems) list += (list.empty() ? "" : "; ") + p;
    throw std::runtime_error("nanoGPT's GPT cannot hold this model: " + list);
  }
  const auto any_dict = [] {
    return c10::impl::GenericDict(c10::StringType::get(), c10::AnyType::get());
  };
  c10::Dict<std::string, at::Tensor> state_dict;
  for (const auto& item : model->named_parameters())
    state_dict.insert(item.key(), item.value().detach().to(torch::kCPU).contiguous());
  state_dict.insert("lm_head.weight", state_dict.at("transformer.wte.weight"));
  for (int64_t l = 0; mask_buffers && l < c.n_layer; ++l) {
    state_dict.insert(
        "transformer.h." + std::to_string(l) + ".attn.bias",
        torch::ones({c.block_size, c.block_size}).tril().view({1, 1, c.block_size, c.block_size}));
  }
  c10::impl::GenericDict args = any_dict();
  args.insert("n_layer", c.n_layer);
  args.insert("n_head", c.n_head);
  args.insert("n_embd", c.n_embd);
  args.insert("block_size", c.block_size);
  args.insert("bias", c.bias);
  args.insert("vocab_size", c.vocab_size);
  args.insert("dropout", c.dropout);
  const TrainConfig& t = config.train;
  c10::impl::GenericDict train = any_dict();
  train.insert("dataset", dataset);
  for (const auto& [key, value] : std::vector<std::pair<std::string, IValue>>{
           {"batch_size", t.batch_size},
           {"gradient_accumulation_steps", t.gradient_accumulation_steps},
           {"max_iters", t.max_iters},
           {"learning_rate", t.learning_rate},
           {"decay_lr", t.decay_lr},
           {"warmup_iters", t.warmup_iters},
           {"lr_decay_iters", t.lr_decay_iters},
           {"min_lr", t.min_lr},
           {"beta1", t.beta1},
           {"beta2", t.beta2},
           {"weight_decay", t.weight_decay},
           {"grad_clip", t.grad_clip},
           {"eval_interval", t.eval_interval},
           {"eval_iters", t.eval_iters},
           {"log_interval", t.log_interval},
           {"n_layer", c.n_layer},
           {"n_head", c.n_head},
           {"n_embd", c.n_embd},
           {"block_size", c.block_size},
           {"dropout", c.dropout},
           {"bias", c.bias}}) {
    train.insert(key, value);
  }
  c10::impl::GenericDict doc = any_dict();
  doc.insert("model", state_dict);
  doc.insert("model_args", args);
  doc.insert("iter_num", iter_num);
  doc.insert("best_val_loss", std::isfinite(best_val_loss) ? best_val_loss : 1e9);
  doc.insert("config", train);
  if (!moments.empty()) {
    // torch.optim.AdamW's state dict for nanoGPT's two groups.
    const std::vector<std::string> order = optimizer_order(model);
    c10::impl::GenericDict state(c10::IntType::get(), c10::AnyType::get());
    c10::List<int64_t> decayed, rest;
    const auto params = model->named_parameters();
    for (size_t i = 0; i < order.size(); ++i) {
      c10::impl::GenericDict s = any_dict();
      s.insert("step", torch::tensor(static_cast<double>(optimizer_steps), torch::kFloat32));
      s.insert("exp_avg", moments.at("exp_avg." + order[i]).to(torch::kCPU).contiguous());
      s.insert("exp_avg_sq", moments.at("exp_avg_sq." + order[i]).to(torch::kCPU).contiguous());
      state.insert(static_cast<int64_t>(i), s);
      (params[order[i]].dim() >= 2 ? decayed : rest).push_back(static_cast<int64_t>(i));
    }
    c10::List<IValue> groups(c10::AnyType::get());
    for (const auto& [indices, decay] :
         {std::pair{decayed, t.weight_decay}, std::pair{rest, 0.0}}) {
      c10::impl::GenericDict g = any_dict();
      g.insert("lr", t.learning_rate);
      g.insert("betas", c10::ivalue::Tuple::create({IValue(t.beta1), IValue(t.beta2)}));
      g.insert("eps", 1e-8);
      g.insert("weight_decay", decay);
      g.insert("amsgrad", false);
      g.insert("maximize", false);
      g.insert("foreach", IValue());
      g.insert("capturable", false);
      g.insert("params", indices);
      groups.push_back(g);
    }
    c10::impl::GenericDict optimizer = any_dict();
    optimizer.insert("state", state);
    optimizer.insert("param_groups", groups);
    doc.insert("optimizer", optimizer);
  }
  const std::vector<char> bytes = torch::pickle_save(IValue(doc));
  write_file_atomic(path, std::string_view(bytes.data(), bytes.size()));
}

void write_nanogpt_meta(const fs::path& path, const std::vector<std::string>& itos) {
  c10::Dict<int64_t, std::string> by_id;
  c10::Dict<std::string, int64_t> by_text;
  for (size_t i = 0; i < itos.size(); ++i) {
    by_id.insert(static_cast<int64_t>(i), itos[i]);
    by_text.insert(itos[i], static_cast<int64_t>(i));
  }
  c10::impl::GenericDict meta(c10::StringType::get(), c10::AnyType::get());
  meta.insert("vocab_size", static_cast<int64_t>(itos.size()));
  meta.insert("itos", by_id);
  meta.insert("stoi", by_text);
  const std::vector<char> bytes = torch::jit::pickle(IValue(meta));
  write_file_atomic(path, std::string_view(bytes.data(), bytes.size()));
}

}  // namespace tinylm
