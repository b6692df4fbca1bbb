#include "train/run/run_config.h"

#include <algorithm>
#include <stdexcept>

#include <toml++/toml.h>

#include "data/utf8.h"

namespace tinylm {
namespace {

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

// `node` read as a value of the same type as `like` (the key's default).
ConfigValue read_value(const toml::node& node, const ConfigValue& like, const std::string& name,
                       const std::string& where) {
  const auto bad = [&](const char* expected) {
    return std::invalid_argument(name + where + ": expected " + expected + ", got " +
                                 type_name(node));
  };
  if (std::holds_alternative<bool>(like)) {
    if (!node.is_boolean()) throw bad("true or false");
    return node.as_boolean()->get();
  }
  if (std::holds_alternative<int64_t>(like)) {
    if (!node.is_integer()) throw bad("an integer");
    return node.as_integer()->get();
  }
  if (std::holds_alternative<double>(like)) {
    if (node.is_integer()) return static_cast<double>(node.as_integer()->get());
    if (!node.is_floating_point()) throw bad("a number");
    return node.as_floating_point()->get();
  }
  if (std::holds_alternative<std::string>(like)) {
    if (!node.is_string()) throw bad("a string");
    return node.as_string()->get();
  }
  const toml::array* array = node.as_array();
  if (!array) throw bad("an array of strings");
  std::vector<std::string> out;
  for (const toml::node& item : *array) {
    if (!item.is_string()) throw bad("an array of strings");
    out.push_back(item.as_string()->get());
  }
  return out;
}

// Sets key `k` of `config` from `node`; an enum's unknown name is an error naming key and place.
void set_key(const ConfigKey<RunConfig>& k, RunConfig& config, const toml::node& node,
             const std::string& where) {
  const ConfigValue value = read_value(node, k.get(RunConfig{}), k.name, where);
  try {
    k.set(config, value);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(k.name + " " + e.what() + where);
  }
}

// What a key of this value's type accepts when nothing narrows it, for the key table.
const char* table_words(const ConfigValue& value) {
  switch (value.index()) {
    case 0: return "true, false";
    case 1: return "an integer";
    case 2: return "a number";
    case 3: return "a string";
    default: return "strings";
  }
}

bool is_device(const ConfigValue& v) {
  const std::string& d = std::get<std::string>(v);
  return d == "cpu" || d == "cuda" ||
         (d.rfind("cuda:", 0) == 0 && d.size() > 5 &&
          d.find_first_not_of("0123456789", 5) == std::string::npos);
}

bool symbols_are_clean(const ConfigValue& v) {
  for (const std::string& symbol : std::get<std::vector<std::string>>(v)) {
    if (symbol.empty() || symbol.find(',') != std::string::npos) return false;
  }
  return true;
}

}  // namespace

InductionShape DataConfig::induction_shape() const {
  return {static_cast<int>(induction_prefix_max), static_cast<int>(induction_repeat_min),
          static_cast<int>(induction_repeat_max), static_cast<int>(induction_symbols)};
}

namespace {

std::vector<ConfigKey<DataConfig>> data_keys() {
  using D = DataConfig;
  return {
      key("source", &D::source, anything(),
          "the text at data.path, or the generated corpus of configs/induction.toml"),
      key("path", &D::path, anything(),
          "a UTF-8 file, or a directory whose *.txt files are read in sorted order"),
      key("val_path", &D::val_path, anything(),
          "a separate validation corpus (file or directory); empty: split data.path"),
      key("synthetic_size", &D::synthetic_size, between(1000, 1e9),
          "characters of a generated corpus (from train.seed)"),
      key("induction_prefix_max", &D::induction_prefix_max, between(0, 1e6),
          "the induction corpus: random symbols before each segment, 0 to this many"),
      key("induction_repeat_min", &D::induction_repeat_min, between(1, 1e6),
          "the induction corpus: the shortest segment that repeats"),
      key("induction_repeat_max", &D::induction_repeat_max, between(1, 1e6),
          "the induction corpus: the longest segment that repeats"),
      key("induction_symbols", &D::induction_symbols, between(2, kInductionAlphabetSize),
          "the induction corpus: symbols drawn from (the vocabulary)"),
      key("train_fraction", &D::train_fraction, between(0, 1, "()"),
          "without val_path: the first part of the tokens trains, the rest validates"),
      key("tokenizer", &D::tokenizer, anything(),
          "Unicode code points (nanoGPT's ids), 256 bytes, SentencePiece BPE/unigram, or GPT-2's "
          "byte-level BPE"),
      key("tokenizer_model", &D::tokenizer_model, anything(),
          "an existing SentencePiece .model (empty: train one on the train split); for gpt2 the "
          "directory holding vocab.json and merges.txt"),
      key("vocab_size", &D::vocab_size, between(8, 1e6), "SentencePiece training: pieces"),
      key("model_type", &D::model_type, anything(), "SentencePiece training: the algorithm"),
      key("character_coverage", &D::character_coverage, between(0, 1, "(]"),
          "SentencePiece training: share of characters given their own piece"),
      key("byte_fallback", &D::byte_fallback, anything(),
          "SentencePiece training: characters without a piece become UTF-8 byte pieces"),
      key("user_defined_symbols", &D::user_defined_symbols,
          rule("non-empty strings without commas", symbols_are_clean),
          "strings always kept as one piece, e.g. [\"<|endoftext|>\"]"),
      key("sampling", &D::sampling, anything(),
          "windows at uniform offsets (nanoGPT), or every window once per epoch, shuffled"),
      key("cache_dir", &D::cache_dir, anything(),
          "where token files go; empty: cache/<config name> in the working directory"),
  };
}

std::vector<ConfigKey<TrainConfig>> train_keys() {
  using T = TrainConfig;
  return {
      key("batch_size", &T::batch_size, at_least(1), "sequences per micro-batch"),
      key("gradient_accumulation_steps", &T::gradient_accumulation_steps, at_least(1),
          "micro-batches per step; sequences per step = batch_size times this"),
      key("max_iters", &T::max_iters, at_least(0), "optimizer steps"),
      key("learning_rate", &T::learning_rate, above(0), "AdamW's peak rate"),
      key("decay_lr", &T::decay_lr, anything(), "linear warmup, then cosine to min_lr"),
      key("warmup_iters", &T::warmup_iters, at_least(0), "steps of linear warmup"),
      key("stable_iters", &T::stable_iters, at_least(0),
          "steps at learning_rate after the warmup, before the cosine starts"),
      key("lr_decay_iters", &T::lr_decay_iters, anything(),
          "the step where the cosine reaches min_lr; > warmup_iters + stable_iters"),
      key("min_lr", &T::min_lr, at_least(0), "the final rate; <= learning_rate"),
      key("beta1", &T::beta1, between(0, 1, "[)"), "AdamW"),
      key("beta2", &T::beta2, between(0, 1, "[)"), "AdamW"),
      key("weight_decay", &T::weight_decay, at_least(0), "AdamW, on 2-D+ parameters only"),
      key("grad_clip", &T::grad_clip, at_least(0), "global gradient norm clip; 0 = off"),
      key("optimizer", &T::optimizer, anything(),
          "adamw for all; muon: Newton-Schulz-orthogonalised momentum for the blocks' matrices, "
          "AdamW for the rest"),
      key("muon_learning_rate", &T::muon_learning_rate, above(0),
          "Muon's peak rate, on the same schedule as learning_rate"),
      key("muon_momentum", &T::muon_momentum, between(0, 1, "[)"), "Muon's Nesterov momentum"),
      key("eval_interval", &T::eval_interval, at_least(1),
          "steps between loss estimates and checkpoints"),
      key("eval_iters", &T::eval_iters, at_least(1), "random batches per loss estimate"),
      key("log_interval", &T::log_interval, at_least(1), "steps between log lines"),
      key("snapshots", &T::snapshots, anything(),
          "record every head's patterns and scores at steps 0, 1, 2, 5, 10, 20, ... and at "
          "evals, in RUN/snapshots/, for the report"),
      key("probe_interval", &T::probe_interval, at_least(0),
          "steps between readings of the induction probe, which find the phase change as it "
          "happens; 0 = at evals only"),
      key("seed", &T::seed, at_least(0), "init, batches, dropout and the probe"),
      key("dtype", &T::dtype, anything(),
          "precision of the matmuls (autocast); auto = bfloat16 where the CPU has AMX-BF16 or "
          "AVX512-BF16 or on CUDA, else float32; weights and AdamW stay float32"),
      key("device", &T::device, rule("cpu, cuda or cuda:N", is_device),
          "where the model, batches and AdamW state live (--device)"),
      key("dist_timeout_s", &T::dist_timeout_s, above(0),
          "how long a rank waits for the others before it stops with an error"),
  };
}

std::vector<ConfigKey<SampleConfig>> sample_keys() {
  using S = SampleConfig;
  return {
      key("prompt", &S::prompt, anything(), "the text to continue (tinylm sample)"),
      key("max_new_tokens", &S::max_new_tokens, between(1, static_cast<double>(kMaxNewTokensLimit)),
          "tokens per sample"),
      key("temperature", &S::temperature, at_least(0), "0 = greedy"),
      key("top_k", &S::top_k, at_least(0), "keep the k likeliest tokens; 0 = off"),
      key("top_p", &S::top_p, between(0, 1, "(]"), "nucleus sampling; 1 = off"),
      key("num_samples", &S::num_samples, between(1, 1000), "samples, drawn in one batch"),
      key("seed", &S::seed, at_least(0), "the sampling generator's seed"),
      key("stop", &S::stop, anything(),
          "a sample ends after the first occurrence of this text; empty = never"),
  };
}

std::vector<ConfigKey<RunConfig>> declare_run_keys() {
  std::vector<ConfigKey<RunConfig>> keys = lift("model", &RunConfig::model, model_keys());
  for (auto part :
       {lift("data", &RunConfig::data, data_keys()), lift("train", &RunConfig::train, train_keys()),
        lift("sample", &RunConfig::sample, sample_keys())}) {
    keys.insert(keys.end(), part.begin(), part.end());
  }
  return keys;
}

const ConfigKey<RunConfig>* find_key(const std::string& name) {
  for (const ConfigKey<RunConfig>& k : run_keys()) {
    if (k.name == name) return &k;
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

}  // namespace

const std::vector<ConfigKey<RunConfig>>& run_keys() {
  static const std::vector<ConfigKey<RunConfig>> keys = declare_run_keys();
  return keys;
}

std::vector<std::string> config_keys() {
  std::vector<std::string> keys;
  for (const ConfigKey<RunConfig>& k : run_keys()) keys.push_back(k.name);
  return keys;
}

bool fixed_by_the_run(const std::string& name) {
  static const char* const kTokenizerKeys[] = {"data.tokenizer",           "data.tokenizer_model",
                                               "data.vocab_size",          "data.model_type",
                                               "data.character_coverage",  "data.byte_fallback",
                                               "data.user_defined_symbols"};
  if (name.rfind("model.", 0) == 0) return true;
  for (const char* key : kTokenizerKeys) {
    if (name == key) return true;
  }
  return false;
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
  for (const ConfigKey<RunConfig>& k : run_keys()) {
    // Text is UTF-8: config.toml, config.json and the prompt are written as it. Checked
    // first: a key's own check quotes its value, through JSON, which throws on other bytes
    // (fuzz_config_overrides found "train.device=t\xFF").
    const ConfigValue value = k.get(*this);
    std::vector<std::string> texts;
    if (const auto* s = std::get_if<std::string>(&value)) texts = {*s};
    if (const auto* list = std::get_if<std::vector<std::string>>(&value)) texts = *list;
    for (const std::string& text : texts) {
      const size_t bad = find_invalid_utf8(text);
      require(bad == std::string::npos,
              k.name + " must be UTF-8 text (byte " + std::to_string(bad) + " is not)");
    }
    if (k.name.rfind("model.", 0) != 0) k.check(*this);
  }
  ModelConfig m = model;
  if (m.vocab_size == 0) m.vocab_size = 1;  // not known until the tokenizer is built
  m.validate();

  // What no single key can say.
  require(data.source != DataSource::kFile || !data.path.empty(),
          "data.path must name a corpus file or directory");
  require(data.tokenizer_model.empty() || data.tokenizer == TokenizerKind::kSentencePiece ||
              data.tokenizer == TokenizerKind::kGpt2,
          "data.tokenizer_model is set, so data.tokenizer must be \"sentencepiece\" or \"gpt2\" "
          "(got \"" +
              std::string(name_of(data.tokenizer)) + "\")");
  require(data.tokenizer != TokenizerKind::kGpt2 || !data.tokenizer_model.empty(),
          "data.tokenizer = \"gpt2\" needs data.tokenizer_model: the directory holding GPT-2's "
          "vocab.json and merges.txt");
  require(data.induction_repeat_max >= data.induction_repeat_min,
          "data.induction_repeat_max (" + std::to_string(data.induction_repeat_max) +
              ") must be >= data.induction_repeat_min (" +
              std::to_string(data.induction_repeat_min) + ")");
  require(data.source != DataSource::kInduction || data.tokenizer == TokenizerKind::kChar ||
              data.tokenizer == TokenizerKind::kByte,
          "data.source = \"induction\" needs data.tokenizer = \"char\" or \"byte\"");
  const TrainConfig& t = train;
  require(t.min_lr <= t.learning_rate, "train.min_lr must be in [0, train.learning_rate] (got " +
                                           config_value_text(t.min_lr) + ")");
  require(!t.decay_lr || t.lr_decay_iters > t.warmup_iters + t.stable_iters,
          "train.lr_decay_iters (" + std::to_string(t.lr_decay_iters) +
              ") must be greater than train.warmup_iters + train.stable_iters (" +
              std::to_string(t.warmup_iters + t.stable_iters) + ")");
}

namespace {

RunConfig read_run_config(const std::filesystem::path& path) {
  if (!std::filesystem::is_regular_file(path)) {
    throw std::runtime_error("config file not found: " + path.string());
  }
  toml::table doc;
  try {
    doc = toml::parse_file(path.string());
  } catch (const toml::parse_error& e) {
    throw std::invalid_argument(path.string() + ":" + std::to_string(e.source().begin.line) + ": " +
                                std::string(e.description()));
  }
  RunConfig config;
  for (const auto& [section_key, section_node] : doc) {
    const std::string section(section_key.str());
    const auto line =
        " (" + path.string() + ":" + std::to_string(section_node.source().begin.line) + ")";
    const toml::table* table = section_node.as_table();
    if (section != "model" && section != "data" && section != "train" && section != "sample") {
      if (!table) throw unknown_key(section, line);
      throw std::invalid_argument("unknown config section [" + section + "]" + line +
                                  "; sections are [model], [data], [train], [sample]");
    }
    if (!table) throw std::invalid_argument("[" + section + "]" + line + " must be a table");
    for (const auto& [key, node] : *table) {
      const std::string name = section + "." + std::string(key.str());
      const auto where =
          " (" + path.string() + ":" + std::to_string(node.source().begin.line) + ")";
      const ConfigKey<RunConfig>* k = find_key(name);
      if (!k) throw unknown_key(name, where);
      set_key(*k, config, node, where);
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

}  // namespace

RunConfig load_run_config(const std::filesystem::path& path) {
  // What is wrong with a file is the file's error (std::runtime_error), as with every loader;
  // std::invalid_argument is left to flags and overrides (usage, exit status 2).
  try {
    return read_run_config(path);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(e.what());
  }
}

void apply_overrides(RunConfig& config, const std::vector<std::string>& overrides) {
  for (const std::string& item : overrides) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos) {
      throw std::invalid_argument("override " + item + " must look like section.key=value");
    }
    const std::string name = item.substr(0, eq), text = item.substr(eq + 1);
    const ConfigKey<RunConfig>* k = find_key(name);
    if (!k) throw unknown_key(name, " (command line)");
    const std::string where = " (command line)";
    if (std::holds_alternative<std::string>(k->get(config))) {
      set_key(*k, config, toml::value<std::string>(text), where);  // strings need no quotes
      continue;
    }
    toml::table parsed;
    try {
      parsed = toml::parse("v = " + text);
    } catch (const toml::parse_error& e) {
      throw std::invalid_argument(name + where + ": cannot read value \"" + text + "\" (" +
                                  std::string(e.description()) + ")");
    }
    set_key(*k, config, *parsed.get("v"), where);
  }
  config.validate();
}

std::string to_toml(const RunConfig& config) {
  // Written by hand rather than through toml++'s printer, which emits a lone newline as a
  // multi-line literal that reads back empty, and 0.9 as 0.90000000000000002.
  std::string out = "# The fully resolved config of this run, written by tinylm.\n";
  std::string section;
  for (const ConfigKey<RunConfig>& k : run_keys()) {
    const size_t dot = k.name.find('.');
    if (k.name.substr(0, dot) != section) {
      section = k.name.substr(0, dot);
      out += "\n[" + section + "]\n";
    }
    out += k.name.substr(dot + 1) + " = " + config_value_text(k.get(config)) + "\n";
  }
  return out;
}

std::string config_key_table() {
  // Pipes inside a cell would end it: Markdown spells them \|.
  const auto cell = [](std::string text) {
    for (size_t at = text.find('|'); at != std::string::npos; at = text.find('|', at + 2)) {
      text.replace(at, 1, "\\|");
    }
    return text;
  };
  const RunConfig defaults;
  std::string out = "| key | default | accepts | meaning |\n|---|---|---|---|\n";
  for (const ConfigKey<RunConfig>& k : run_keys()) {
    const ConfigValue value = k.get(defaults);
    std::string accepts = k.accepts.summary();
    if (accepts.empty()) accepts = table_words(value);
    out += "| `" + k.name + "` | `" + cell(config_value_text(value)) + "` | " + cell(accepts) +
           " | " + cell(k.help) + " |\n";
  }
  return out;
}

}  // namespace tinylm
