// `tinylm import CKPT.pt|HF_DIR --out RUN --data FILE [--meta META.pkl]`
// Turns nanoGPT's ckpt.pt (train/formats/nanogpt_checkpoint.h) or a Hugging Face GPT-2 directory
// (train/formats/hf_gpt2_checkpoint.h) into an ordinary run directory: eval, sample, inspect and
// `train --resume` (fine-tuning) work on it. The weights are copied as they are; nanoGPT's
// AdamW moments too, when the checkpoint has them, so training goes on where nanoGPT left
// it. Everything is read and checked before anything is written.

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <filesystem>

#include <spdlog/spdlog.h>

#include "data/char_tokenizer.h"
#include "data/utf8.h"
#include "tools/cli.h"
#include "tools/commands.h"
#include "train/adamw.h"
#include "train/formats/hf_gpt2_checkpoint.h"
#include "train/formats/nanogpt_checkpoint.h"
#include "train/run/checkpoint.h"

namespace tinylm {
namespace fs = std::filesystem;

namespace {

struct ImportArgs {
  std::string source, out, meta, data;
  int threads = 0;
};

// What a source becomes: a run's config, tokenizer and weights, and where training stood.
struct Imported {
  RunConfig config;
  std::unique_ptr<Tokenizer> tokenizer;
  std::map<std::string, torch::Tensor> weights, moments;
  int64_t optimizer_steps = 0;
  TrainingState state;
  std::string description;  // for the log line: "nanoGPT, step 300"
};

// nanoGPT's char vocabulary as tinylm's: one code point per id, in increasing order (as
// prepare.py sorts them).
CharTokenizer char_tokenizer_of(const std::vector<std::string>& itos, const fs::path& meta) {
  std::vector<char32_t> vocab;
  for (size_t id = 0; id < itos.size(); ++id) {
    const std::vector<char32_t> cps = decode_utf8(itos[id], meta.string());
    if (cps.size() != 1) {
      throw std::runtime_error(meta.string() + ": id " + std::to_string(id) + " is \"" + itos[id] +
                               "\", not one character: only char vocabularies are read");
    }
    vocab.push_back(cps.front());
  }
  try {
    return CharTokenizer(vocab);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(meta.string() + ": " + e.what());
  }
}

// The run's config: the model from model_args, train.py's settings where tinylm has the
// same key (a value tinylm refuses keeps its default, with a warning), the corpus given.
RunConfig run_config_of(const NanoGptCheckpoint& ckpt, const ImportArgs& args) {
  RunConfig config;
  config.model = ckpt.model;
  config.data.path = fs::absolute(args.data).lexically_normal().string();
  std::vector<std::string> overrides;
  const std::vector<std::string> keys = config_keys();
  for (const auto& [key, value] : ckpt.config) {
    if (key == "dtype" || key == "device" || key == "seed") continue;  // this machine's choice
    if (std::find(keys.begin(), keys.end(), "train." + key) != keys.end())
      overrides.push_back("train." + key + "=" + value);
  }
  // All together (one may need another: lr_decay_iters > warmup_iters); failing that, each
  // one that tinylm accepts.
  const auto applied = [](RunConfig c, const std::vector<std::string>& some) {
    apply_overrides(c, some);
    c.validate();
    return c;
  };
  try {
    config = applied(config, overrides);
  } catch (const std::invalid_argument&) {
    for (const std::string& o : overrides) {
      try {
        config = applied(config, {o});
      } catch (const std::invalid_argument& e) {
        spdlog::warn("kept tinylm's default for {}: nanoGPT's value is refused ({})",
                     o.substr(0, o.find('=')), e.what());
      }
    }
  }
  config.model.vocab_size = ckpt.model.vocab_size;
  return config;
}

Imported from_nanogpt(const ImportArgs& args) {
  NanoGptCheckpoint ckpt = read_nanogpt_checkpoint(args.source);
  if (args.meta.empty()) {
    const auto it = ckpt.config.find("dataset");  // a TOML string: "shakespeare_char"
    const std::string dataset = it == ckpt.config.end() || it->second.size() < 2
                                    ? "DATASET"
                                    : it->second.substr(1, it->second.size() - 2);
    throw UsageError(
        args.source + " keeps its tokenizer elsewhere: nanoGPT's char models read it from data/" +
        dataset +
        "/meta.pkl; pass it as --meta PATH (nanoGPT's GPT-2 BPE datasets are not read yet; GPT-2 "
        "itself comes from a Hugging Face directory)");
  }
  auto tokenizer =
      std::make_unique<CharTokenizer>(char_tokenizer_of(read_nanogpt_meta(args.meta), args.meta));
  if (tokenizer->vocab_size() != ckpt.model.vocab_size) {
    throw std::runtime_error(args.meta + " has " + std::to_string(tokenizer->vocab_size()) +
                             " characters, " + args.source + "'s model_args vocab_size " +
                             std::to_string(ckpt.model.vocab_size));
  }
  Imported out;
  out.config = run_config_of(ckpt, args);
  out.tokenizer = std::move(tokenizer);
  out.weights = std::move(ckpt.weights);
  out.moments = std::move(ckpt.moments);
  out.optimizer_steps = ckpt.optimizer_steps;
  out.state.step = ckpt.iter_num;
  out.state.last_eval_step = ckpt.iter_num;  // nanoGPT evaluated before it saved
  out.state.best_val_loss = ckpt.best_val_loss;
  out.description = "nanoGPT, step " + std::to_string(ckpt.iter_num);
  return out;
}

// GPT-2's weights and tokenizer; tinylm's training defaults (there is no optimizer state).
Imported from_hugging_face(const ImportArgs& args) {
  if (!args.meta.empty()) {
    throw UsageError("--meta is nanoGPT's char vocabulary; " + args.source +
                     " is a Hugging Face model, whose tokenizer is its vocab.json and merges.txt");
  }
  HfGpt2Checkpoint hf = read_hf_gpt2(args.source);
  Imported out;
  out.config.model = hf.model;
  out.config.data.path = fs::absolute(args.data).lexically_normal().string();
  out.config.data.tokenizer = TokenizerKind::kGpt2;
  out.config.data.tokenizer_model = fs::absolute(args.source).lexically_normal().string();
  try {
    out.config.validate();
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(args.source + ": " + e.what());
  }
  out.tokenizer = std::move(hf.tokenizer);
  out.weights = std::move(hf.weights);
  out.description = "Hugging Face GPT-2, " + out.tokenizer->describe();
  return out;
}

int run_import(const ImportArgs& args) {
  set_threads(args.threads);
  const fs::path out(args.out);
  if (fs::exists(out) && !fs::is_empty(out)) {
    throw std::runtime_error("cannot import into " + out.string() +
                             ": it exists and is not empty; choose a new --out");
  }
  if (!fs::is_regular_file(args.data)) {
    throw std::runtime_error("--data " + args.data +
                             ": no such file (the corpus the run evaluates on and fine-tunes "
                             "with, e.g. nanoGPT's data/shakespeare_char/input.txt)");
  }
  if (!fs::exists(args.source)) throw std::runtime_error(args.source + ": no such file");
  Imported imported = fs::is_directory(args.source) ? from_hugging_face(args) : from_nanogpt(args);
  const RunConfig& config = imported.config;
  GPT model(config.model);
  {
    torch::NoGradGuard no_grad;
    for (auto& item : model->named_parameters())
      item.value().copy_(imported.weights.at(item.key()));
  }
  AdamW optimizer(model, config.train);
  if (!imported.moments.empty())
    optimizer.restore(imported.moments, imported.optimizer_steps, args.source);
  TrainingState& state = imported.state;
  state.threads = torch::get_num_threads();
  for (auto [rng, offset] : {std::pair{&state.train_rng, 1}, std::pair{&state.eval_rng, 2}}) {
    auto generator = at::make_generator<at::CPUGeneratorImpl>(
        static_cast<uint64_t>(config.train.seed) + static_cast<uint64_t>(offset));
    *rng = generator_state(generator);
  }
  save_checkpoint(out, config, *imported.tokenizer, model, optimizer.moments(), state);
  spdlog::info("imported {} ({}, {} parameters{}) into {}", args.source, imported.description,
               model->num_parameters(),
               imported.moments.empty() ? ", no optimizer state" : ", with its AdamW moments",
               out.string());
  return 0;
}

}  // namespace

Command add_import_command(CLI::App& app) {
  auto args = std::make_shared<ImportArgs>();
  CLI::App* cmd = app.add_subcommand(
      "import",
      "Make a run directory from nanoGPT's ckpt.pt or a Hugging Face GPT-2 directory (eval, "
      "sample, inspect, resume)");
  cmd->add_option("source", args->source,
                  "nanoGPT's ckpt.pt, or a directory with config.json, model.safetensors, "
                  "vocab.json and merges.txt")
      ->required();
  cmd->add_option("--out", args->out, "The run directory to write (new or empty)")->required();
  cmd->add_option("--data", args->data,
                  "The run's corpus (data.path), split 0.9/0.1 as nanoGPT's prepare.py does: "
                  "for nanoGPT the one it was trained on (data/DATASET/input.txt); for GPT-2 "
                  "any text to evaluate and fine-tune on")
      ->required();
  cmd->add_option("--meta", args->meta, "nanoGPT's meta.pkl: the char vocabulary");
  add_threads_flag(cmd, args->threads);
  return [args] { return run_import(*args); };
}

}  // namespace tinylm
