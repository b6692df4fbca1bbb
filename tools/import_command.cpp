// `tinylm import SRC --out RUN --data FILE [--meta META.pkl]`
// Turns nanoGPT's ckpt.pt (train/nanogpt_checkpoint.h) into an ordinary run directory:
// eval, sample, inspect and `train --resume` (fine-tuning) work on it. The weights are
// copied as they are; the AdamW moments too, when the checkpoint has them, so training goes
// on where nanoGPT left it. Everything is read and checked before anything is written.

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <filesystem>

#include <spdlog/spdlog.h>

#include "data/char_tokenizer.h"
#include "data/utf8.h"
#include "tools/cli.h"
#include "tools/commands.h"
#include "train/checkpoint.h"
#include "train/nanogpt_checkpoint.h"

namespace tinylm {
namespace fs = std::filesystem;

namespace {

struct ImportArgs {
  std::string source, out, meta, data;
  int threads = 0;
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

int run_import(const ImportArgs& args) {
  set_threads(args.threads);
  const fs::path out(args.out);
  if (fs::exists(out) && !fs::is_empty(out)) {
    throw std::runtime_error("cannot import into " + out.string() +
                             ": it exists and is not empty; choose a new --out");
  }
  if (!fs::is_regular_file(args.data)) {
    throw std::runtime_error("--data " + args.data +
                             ": no such file (the corpus the checkpoint was trained on, e.g. "
                             "nanoGPT's data/shakespeare_char/input.txt)");
  }
  const NanoGptCheckpoint ckpt = read_nanogpt_checkpoint(args.source);
  if (args.meta.empty()) {
    const auto it = ckpt.config.find("dataset");  // a TOML string: "shakespeare_char"
    const std::string dataset = it == ckpt.config.end() || it->second.size() < 2
                                    ? "DATASET"
                                    : it->second.substr(1, it->second.size() - 2);
    throw UsageError(
        args.source + " keeps its tokenizer elsewhere: nanoGPT's char models read it from data/" +
        dataset + "/meta.pkl; pass it as --meta PATH (GPT-2 BPE vocabularies are not read yet)");
  }
  const CharTokenizer tokenizer = char_tokenizer_of(read_nanogpt_meta(args.meta), args.meta);
  if (tokenizer.vocab_size() != ckpt.model.vocab_size) {
    throw std::runtime_error(args.meta + " has " + std::to_string(tokenizer.vocab_size()) +
                             " characters, " + args.source + "'s model_args vocab_size " +
                             std::to_string(ckpt.model.vocab_size));
  }
  const RunConfig config = run_config_of(ckpt, args);
  GPT model(config.model);
  {
    torch::NoGradGuard no_grad;
    for (auto& item : model->named_parameters()) item.value().copy_(ckpt.weights.at(item.key()));
  }
  AdamW optimizer(model, config.train);
  if (!ckpt.moments.empty()) optimizer.restore(ckpt.moments, ckpt.optimizer_steps, args.source);
  TrainingState state;
  state.step = ckpt.iter_num;
  state.last_eval_step = ckpt.iter_num;  // nanoGPT evaluated before it saved
  state.best_val_loss = ckpt.best_val_loss;
  state.threads = torch::get_num_threads();
  for (auto [rng, offset] : {std::pair{&state.train_rng, 1}, std::pair{&state.eval_rng, 2}}) {
    auto generator = at::make_generator<at::CPUGeneratorImpl>(
        static_cast<uint64_t>(config.train.seed) + static_cast<uint64_t>(offset));
    *rng = generator_state(generator);
  }
  save_checkpoint(out, config, tokenizer, model, optimizer, state);
  spdlog::info("imported {} (nanoGPT, step {}, {} parameters{}) into {}", args.source,
               ckpt.iter_num, model->num_parameters(),
               ckpt.moments.empty() ? ", no optimizer state" : ", with its AdamW moments",
               out.string());
  return 0;
}

}  // namespace

Command add_import_command(CLI::App& app) {
  auto args = std::make_shared<ImportArgs>();
  CLI::App* cmd = app.add_subcommand(
      "import", "Make a run directory from nanoGPT's ckpt.pt (eval, sample, inspect, resume)");
  cmd->add_option("source", args->source, "nanoGPT's ckpt.pt")->required();
  cmd->add_option("--out", args->out, "The run directory to write (new or empty)")->required();
  cmd->add_option("--data", args->data,
                  "The corpus it was trained on (nanoGPT's data/DATASET/input.txt): the run's "
                  "data.path, split 0.9/0.1 as nanoGPT's prepare.py does")
      ->required();
  cmd->add_option("--meta", args->meta, "nanoGPT's meta.pkl: the char vocabulary");
  cmd->add_option("--threads", args->threads, "Intra-op threads (default: all cores)");
  return [args] { return run_import(*args); };
}

}  // namespace tinylm
