#include "train/run_config.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <variant>

#include <nlohmann/json.hpp>

#include <toml++/toml.h>

namespace tinylm {
namespace {

using Value = std::variant<int64_t, double, bool, std::string, std::vector<std::string>>;

// One key of the schema: how to read it from TOML and write it back.
struct Field {
  std::string name;  // "section.key"
  std::function<void(RunConfig&, const toml::node&, const std::string& where)> set;
  std::function<Value(const RunConfig&)> get;
};

std::string type_name(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a number";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::table: return "a table";
    case toml::node_type::array: return "an array";
    default: return "a date or time";
  }
}

template <class T>
T read_value(const toml::node& node, const std::string& name, const std::string& where) {
  const auto bad = [&](const char* expected) {
    return std::invalid_argument(name + where + ": expected " + expected + ", got " +
                                 type_name(node));
  };
  if constexpr (std::is_same_v<T, bool>) {
    if (!node.is_boolean()) throw bad("true or false");
    return node.as_boolean()->get();
  } else if constexpr (std::is_same_v<T, int64_t>) {
    if (!node.is_integer()) throw bad("an integer");
    return node.as_integer()->get();
  } else if constexpr (std::is_same_v<T, double>) {
    if (node.is_integer()) return static_cast<double>(node.as_integer()->get());
    if (!node.is_floating_point()) throw bad("a number");
    return node.as_floating_point()->get();
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (!node.is_string()) throw bad("a string");
    return node.as_string()->get();
  } else {
    const toml::array* array = node.as_array();
    if (!array) throw bad("an array of strings");
    std::vector<std::string> out;
    for (const toml::node& item : *array) {
      if (!item.is_string()) throw bad("an array of strings");
      out.push_back(item.as_string()->get());
    }
    return out;
  }
}

template <class Section, class T>
Field field(std::string name, Section RunConfig::*section, T Section::*member) {
  Field f;
  f.name = name;
  f.set = [name, section, member](RunConfig& c, const toml::node& node, const std::string& where) {
    (c.*section).*member = read_value<T>(node, name, where);
  };
  f.get = [section, member](const RunConfig& c) -> Value { return (c.*section).*member; };
  return f;
}

const std::vector<Field>& schema() {
  static const std::vector<Field> fields = {
      field("model.n_layer", &RunConfig::model, &ModelConfig::n_layer),
      field("model.n_head", &RunConfig::model, &ModelConfig::n_head),
      field("model.n_embd", &RunConfig::model, &ModelConfig::n_embd),
      field("model.block_size", &RunConfig::model, &ModelConfig::block_size),
      field("model.dropout", &RunConfig::model, &ModelConfig::dropout),
      field("model.bias", &RunConfig::model, &ModelConfig::bias),
      field("model.pos_encoding", &RunConfig::model, &ModelConfig::pos_encoding),
      field("model.norm", &RunConfig::model, &ModelConfig::norm),
      field("model.mlp", &RunConfig::model, &ModelConfig::mlp),
      field("model.n_kv_head", &RunConfig::model, &ModelConfig::n_kv_head),
      field("model.tie_weights", &RunConfig::model, &ModelConfig::tie_weights),
      field("model.attn_only", &RunConfig::model, &ModelConfig::attn_only),
      field("model.init_std", &RunConfig::model, &ModelConfig::init_std),
      field("data.source", &RunConfig::data, &DataConfig::source),
      field("data.path", &RunConfig::data, &DataConfig::path),
      field("data.val_path", &RunConfig::data, &DataConfig::val_path),
      field("data.synthetic_size", &RunConfig::data, &DataConfig::synthetic_size),
      field("data.train_fraction", &RunConfig::data, &DataConfig::train_fraction),
      field("data.tokenizer", &RunConfig::data, &DataConfig::tokenizer),
      field("data.tokenizer_model", &RunConfig::data, &DataConfig::tokenizer_model),
      field("data.vocab_size", &RunConfig::data, &DataConfig::vocab_size),
      field("data.model_type", &RunConfig::data, &DataConfig::model_type),
      field("data.character_coverage", &RunConfig::data, &DataConfig::character_coverage),
      field("data.byte_fallback", &RunConfig::data, &DataConfig::byte_fallback),
      field("data.user_defined_symbols", &RunConfig::data, &DataConfig::user_defined_symbols),
      field("data.sampling", &RunConfig::data, &DataConfig::sampling),
      field("data.cache_dir", &RunConfig::data, &DataConfig::cache_dir),
      field("train.batch_size", &RunConfig::train, &TrainConfig::batch_size),
      field("train.gradient_accumulation_steps", &RunConfig::train,
            &TrainConfig::gradient_accumulation_steps),
      field("train.max_iters", &RunConfig::train, &TrainConfig::max_iters),
      field("train.learning_rate", &RunConfig::train, &TrainConfig::learning_rate),
      field("train.decay_lr", &RunConfig::train, &TrainConfig::decay_lr),
      field("train.warmup_iters", &RunConfig::train, &TrainConfig::warmup_iters),
      field("train.lr_decay_iters", &RunConfig::train, &TrainConfig::lr_decay_iters),
      field("train.min_lr", &RunConfig::train, &TrainConfig::min_lr),
      field("train.beta1", &RunConfig::train, &TrainConfig::beta1),
      field("train.beta2", &RunConfig::train, &TrainConfig::beta2),
      field("train.weight_decay", &RunConfig::train, &TrainConfig::weight_decay),
      field("train.grad_clip", &RunConfig::train, &TrainConfig::grad_clip),
      field("train.eval_interval", &RunConfig::train, &TrainConfig::eval_interval),
      field("train.eval_iters", &RunConfig::train, &TrainConfig::eval_iters),
      field("train.log_interval", &RunConfig::train, &TrainConfig::log_interval),
      field("train.seed", &RunConfig::train, &TrainConfig::seed),
      field("train.dtype", &RunConfig::train, &TrainConfig::dtype),
      field("train.device", &RunConfig::train, &TrainConfig::device),
      field("train.dist_timeout_s", &RunConfig::train, &TrainConfig::dist_timeout_s),
      field("sample.prompt", &RunConfig::sample, &SampleConfig::prompt),
      field("sample.max_new_tokens", &RunConfig::sample, &SampleConfig::max_new_tokens),
      field("sample.temperature", &RunConfig::sample, &SampleConfig::temperature),
      field("sample.top_k", &RunConfig::sample, &SampleConfig::top_k),
      field("sample.top_p", &RunConfig::sample, &SampleConfig::top_p),
      field("sample.num_samples", &RunConfig::sample, &SampleConfig::num_samples),
      field("sample.seed", &RunConfig::sample, &SampleConfig::seed),
      field("sample.stop", &RunConfig::sample, &SampleConfig::stop),
  };
  return fields;
}

const Field* find_field(const std::string& name) {
  for (const Field& f : schema()) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

std::invalid_argument unknown_key(const std::string& key, const std::string& where) {
  std::string message = "unknown config key " + key + where;
  const std::string close = closest_key(key, config_keys());
  if (!close.empty()) message += "; did you mean " + close + "?";
  return std::invalid_argument(message);
}

void require(bool ok, const std::string& message) {
  if (!ok) throw std::invalid_argument(message);
}

std::string str(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

}  // namespace

std::vector<std::string> config_keys() {
  std::vector<std::string> keys;
  for (const Field& f : schema()) keys.push_back(f.name);
  return keys;
}

std::string closest_key(const std::string& key, const std::vector<std::string>& candidates) {
  // Levenshtein distance; a match must be within a third of the key's length.
  const auto distance = [](const std::string& a, const std::string& b) {
    std::vector<size_t> row(b.size() + 1);
    for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
      size_t diagonal = row[0];
      row[0] = i;
      for (size_t j = 1; j <= b.size(); ++j) {
        const size_t up = row[j];
        row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1])});
        diagonal = up;
      }
    }
    return row[b.size()];
  };
  std::string best;
  size_t best_distance = key.size() / 3 + 2;
  for (const std::string& candidate : candidates) {
    // Compare the key part alone too, so "model.n_layers" and "n_layer" in a section both match.
    const std::string tail = candidate.substr(candidate.find('.') + 1);
    const std::string key_tail = key.substr(key.find('.') + 1);
    const size_t d = std::min(distance(key, candidate), distance(key_tail, tail) + 1);
    if (d < best_distance) best_distance = d, best = candidate;
  }
  return best;
}

void RunConfig::validate() const {
  ModelConfig m = model;
  if (m.vocab_size == 0) m.vocab_size = 1;  // not known until the tokenizer is built
  m.validate();

  require(data.source == "file" || data.source == "induction",
          "data.source must be \"file\" or \"induction\" (got \"" + data.source + "\")");
  require(data.source != "file" || !data.path.empty(),
          "data.path must name a corpus file or directory");
  require(data.synthetic_size >= 1000 && data.synthetic_size <= 1000000000,
          "data.synthetic_size must be in [1000, 1000000000] (got " +
              std::to_string(data.synthetic_size) + ")");
  require(data.train_fraction > 0.0 && data.train_fraction < 1.0,
          "data.train_fraction must be in (0, 1) (got " + str(data.train_fraction) + ")");
  require(data.tokenizer == "char" || data.tokenizer == "byte" || data.tokenizer == "sentencepiece",
          "data.tokenizer must be \"char\", \"byte\" or \"sentencepiece\" (got \"" +
              data.tokenizer + "\")");
  require(data.tokenizer_model.empty() || data.tokenizer == "sentencepiece",
          "data.tokenizer_model is set, so data.tokenizer must be \"sentencepiece\" (got \"" +
              data.tokenizer + "\")");
  require(data.vocab_size >= 8 && data.vocab_size <= 1000000,
          "data.vocab_size must be in [8, 1000000] (got " + std::to_string(data.vocab_size) + ")");
  require(data.model_type == "bpe" || data.model_type == "unigram",
          "data.model_type must be \"bpe\" or \"unigram\" (got \"" + data.model_type + "\")");
  require(data.character_coverage > 0.0 && data.character_coverage <= 1.0,
          "data.character_coverage must be in (0, 1] (got " + str(data.character_coverage) + ")");
  for (const std::string& symbol : data.user_defined_symbols) {
    require(!symbol.empty() && symbol.find(',') == std::string::npos,
            "data.user_defined_symbols: \"" + symbol + "\" must be non-empty and contain no comma");
  }
  require(data.sampling == "random" || data.sampling == "epoch",
          "data.sampling must be \"random\" or \"epoch\" (got \"" + data.sampling + "\")");
  require(data.source != "induction" || data.tokenizer != "sentencepiece",
          "data.source = \"induction\" needs data.tokenizer = \"char\" or \"byte\"");

  const TrainConfig& t = train;
  require(t.batch_size >= 1, "train.batch_size must be >= 1 (got " + std::to_string(t.batch_size) + ")");
  require(t.gradient_accumulation_steps >= 1,
          "train.gradient_accumulation_steps must be >= 1 (got " +
              std::to_string(t.gradient_accumulation_steps) + ")");
  require(t.max_iters >= 0, "train.max_iters must be >= 0 (got " + std::to_string(t.max_iters) + ")");
  require(t.learning_rate > 0.0,
          "train.learning_rate must be > 0 (got " + str(t.learning_rate) + ")");
  require(t.min_lr >= 0.0 && t.min_lr <= t.learning_rate,
          "train.min_lr must be in [0, train.learning_rate] (got " + str(t.min_lr) + ")");
  require(t.warmup_iters >= 0,
          "train.warmup_iters must be >= 0 (got " + std::to_string(t.warmup_iters) + ")");
  require(!t.decay_lr || t.lr_decay_iters > t.warmup_iters,
          "train.lr_decay_iters (" + std::to_string(t.lr_decay_iters) +
              ") must be greater than train.warmup_iters (" + std::to_string(t.warmup_iters) + ")");
  require(t.dtype == "float32" || t.dtype == "bfloat16",
          "train.dtype must be one of float32, bfloat16 (got \"" + t.dtype + "\")");
  require(t.device == "cpu" || t.device == "cuda" ||
              (t.device.rfind("cuda:", 0) == 0 && t.device.size() > 5 &&
               t.device.find_first_not_of("0123456789", 5) == std::string::npos),
          "train.device must be cpu, cuda or cuda:N (got \"" + t.device + "\")");
  require(t.dist_timeout_s > 0.0,
          "train.dist_timeout_s must be > 0 (got " + str(t.dist_timeout_s) + ")");
  require(t.beta1 >= 0.0 && t.beta1 < 1.0, "train.beta1 must be in [0, 1) (got " + str(t.beta1) + ")");
  require(t.beta2 >= 0.0 && t.beta2 < 1.0, "train.beta2 must be in [0, 1) (got " + str(t.beta2) + ")");
  require(t.weight_decay >= 0.0,
          "train.weight_decay must be >= 0 (got " + str(t.weight_decay) + ")");
  require(t.grad_clip >= 0.0, "train.grad_clip must be >= 0, 0 = off (got " + str(t.grad_clip) + ")");
  require(t.eval_interval >= 1,
          "train.eval_interval must be >= 1 (got " + std::to_string(t.eval_interval) + ")");
  require(t.eval_iters >= 1, "train.eval_iters must be >= 1 (got " + std::to_string(t.eval_iters) + ")");
  require(t.log_interval >= 1,
          "train.log_interval must be >= 1 (got " + std::to_string(t.log_interval) + ")");
  require(t.seed >= 0, "train.seed must be >= 0 (got " + std::to_string(t.seed) + ")");

  const SampleConfig& s = sample;
  require(s.max_new_tokens >= 1 && s.max_new_tokens <= kMaxNewTokensLimit,
          "sample.max_new_tokens must be in [1, " + std::to_string(kMaxNewTokensLimit) +
              "] (got " + std::to_string(s.max_new_tokens) + ")");
  require(s.temperature >= 0.0,
          "sample.temperature must be >= 0, 0 = greedy (got " + str(s.temperature) + ")");
  require(s.top_k >= 0, "sample.top_k must be >= 0, 0 = off (got " + std::to_string(s.top_k) + ")");
  require(s.top_p > 0.0 && s.top_p <= 1.0,
          "sample.top_p must be in (0, 1], 1 = off (got " + str(s.top_p) + ")");
  require(s.num_samples >= 1 && s.num_samples <= 1000,
          "sample.num_samples must be in [1, 1000] (got " + std::to_string(s.num_samples) + ")");
  require(s.seed >= 0, "sample.seed must be >= 0 (got " + std::to_string(s.seed) + ")");
}

RunConfig load_run_config(const std::filesystem::path& path) {
  if (!std::filesystem::is_regular_file(path)) {
    throw std::runtime_error("config file not found: " + path.string());
  }
  toml::table doc;
  try {
    doc = toml::parse_file(path.string());
  } catch (const toml::parse_error& e) {
    throw std::invalid_argument(path.string() + ":" + std::to_string(e.source().begin.line) +
                                ": " + std::string(e.description()));
  }
  RunConfig config;
  for (const auto& [section_key, section_node] : doc) {
    const std::string section(section_key.str());
    const auto line = " (" + path.string() + ":" + std::to_string(section_node.source().begin.line) + ")";
    const toml::table* table = section_node.as_table();
    if (section != "model" && section != "data" && section != "train" && section != "sample") {
      if (!table) throw unknown_key(section, line);
      throw std::invalid_argument("unknown config section [" + section + "]" + line +
                                  "; sections are [model], [data], [train], [sample]");
    }
    if (!table) throw std::invalid_argument("[" + section + "]" + line + " must be a table");
    for (const auto& [key, node] : *table) {
      const std::string name = section + "." + std::string(key.str());
      const auto where = " (" + path.string() + ":" + std::to_string(node.source().begin.line) + ")";
      const Field* f = find_field(name);
      if (!f) throw unknown_key(name, where);
      f->set(config, node, where);
    }
  }
  // Relative paths are read from the config file's directory, so that a config works from
  // any working directory; they are kept absolute, since a run's config.toml lives elsewhere.
  const auto resolve = [&](std::string& value) {
    if (value.empty()) return;
    std::filesystem::path p(value);
    if (p.is_relative()) p = path.parent_path() / p;
    std::error_code ec;
    const std::filesystem::path absolute = std::filesystem::absolute(p, ec);
    value = (ec ? p : absolute).lexically_normal().string();
  };
  resolve(config.data.path);
  resolve(config.data.val_path);
  resolve(config.data.tokenizer_model);
  resolve(config.data.cache_dir);
  if (config.data.cache_dir.empty()) {
    config.data.cache_dir =
        (std::filesystem::absolute("cache") / path.stem()).lexically_normal().string();
  }
  try {
    config.validate();
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string(e.what()) + " (in " + path.string() + ")");
  }
  return config;
}

void apply_overrides(RunConfig& config, const std::vector<std::string>& overrides) {
  for (const std::string& item : overrides) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos) {
      throw std::invalid_argument("override " + item + " must look like section.key=value");
    }
    const std::string name = item.substr(0, eq), text = item.substr(eq + 1);
    const Field* f = find_field(name);
    if (!f) throw unknown_key(name, " (command line)");
    const std::string where = " (command line)";
    if (std::holds_alternative<std::string>(f->get(config))) {
      f->set(config, toml::value<std::string>(text), where);  // strings need no quotes
      continue;
    }
    toml::table parsed;
    try {
      parsed = toml::parse("v = " + text);
    } catch (const toml::parse_error&) {
      throw std::invalid_argument(name + where + ": cannot read value \"" + text + "\"");
    }
    f->set(config, *parsed.get("v"), where);
  }
  config.validate();
}

std::string to_toml(const RunConfig& config) {
  // Written by hand rather than through toml++'s printer, which emits a lone newline as a
  // multi-line literal that reads back empty, and 0.9 as 0.90000000000000002.
  const auto format = [](const Value& value) -> std::string {
    if (const auto* s = std::get_if<std::string>(&value)) return nlohmann::json(*s).dump();
    if (const auto* b = std::get_if<bool>(&value)) return *b ? "true" : "false";
    if (const auto* i = std::get_if<int64_t>(&value)) return std::to_string(*i);
    if (const auto* list = std::get_if<std::vector<std::string>>(&value)) {
      return nlohmann::json(*list).dump();  // a JSON array of strings is a TOML array
    }
    const double d = std::get<double>(value);
    char text[32];
    for (int precision = 1; precision <= 17; ++precision) {  // shortest exact form
      std::snprintf(text, sizeof text, "%.*g", precision, d);
      if (std::strtod(text, nullptr) == d) break;
    }
    std::string out = text;
    if (out.find_first_of(".eEn") == std::string::npos) out += ".0";  // stay a float in TOML
    return out;
  };
  std::string out = "# The fully resolved config of this run, written by tinylm.\n";
  std::string section;
  for (const Field& f : schema()) {
    const size_t dot = f.name.find('.');
    if (f.name.substr(0, dot) != section) {
      section = f.name.substr(0, dot);
      out += "\n[" + section + "]\n";
    }
    out += f.name.substr(dot + 1) + " = " + format(f.get(config)) + "\n";
  }
  return out;
}

}  // namespace tinylm
