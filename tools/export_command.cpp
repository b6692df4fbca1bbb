// `tinylm export RUN --format nanogpt|llama2c --out PATH [--mask-buffers]`
//   nanogpt  a GPT-2-block run as nanoGPT's ckpt.pt (train/formats/nanogpt_checkpoint.h), which its
//            sample.py and train.py (init_from = 'resume') load, with its AdamW moments when
//            the run has them; a char run's meta.pkl goes beside it.
//   llama2c  a rope/rmsnorm/swiglu run without biases as llama2.c's model.bin, for its
//            run.c, and tokenizer.bin beside it (train/formats/llama2c_export.h).
// A run the target cannot hold is refused, naming each option in the way.

#include <filesystem>

#include <spdlog/spdlog.h>

#include "data/char_tokenizer.h"
#include "data/utf8.h"
#include "tools/cli.h"
#include "tools/commands.h"
#include "train/formats/llama2c_export.h"
#include "train/formats/nanogpt_checkpoint.h"
#include "train/run/checkpoint.h"
#include "train/run/safetensors.h"

namespace tinylm {
namespace fs = std::filesystem;

namespace {

struct ExportArgs {
  std::string run, format = "nanogpt", out;
  bool mask_buffers = false;
  int threads = 0;
};

// The run's AdamW moments ("exp_avg.NAME", ...), or none: a run without optimizer.safetensors,
// or one whose matrices Muon trained (nanoGPT's AdamW has no state for them).
std::map<std::string, torch::Tensor> adamw_moments(const fs::path& run) {
  const fs::path path = run / "optimizer.safetensors";
  if (!fs::is_regular_file(path)) return {};
  std::map<std::string, torch::Tensor> moments = load_safetensors(path).tensors;
  moments.erase("step");
  for (const auto& [name, t] : moments) {
    if (name.rfind("muon_momentum.", 0) == 0) {
      spdlog::warn("{} was trained with Muon: the checkpoint gets no optimizer state",
                   run.string());
      return {};
    }
  }
  return moments;
}

// The options in the way, one per line, as an error naming the target.
void refuse_unless_empty(const std::vector<std::string>& problems, const std::string& what) {
  if (problems.empty()) return;
  std::string list;
  for (const std::string& p : problems) list += "\n  " + p;
  throw std::runtime_error(what + list);
}

int export_llama2c(const ExportArgs& args, LoadedRun& run) {
  refuse_unless_empty(llama2c_incompatibilities(run.model->config()),
                      args.run + " is not a model llama2.c's run.c can run:");
  const fs::path out(args.out), tokenizer = out.parent_path() / "tokenizer.bin";
  write_llama2c_model(out, run.model);
  write_llama2c_tokenizer(tokenizer, *run.tokenizer);
  spdlog::info("wrote {} and {} (llama2.c: run {} -z {})", out.string(), tokenizer.string(),
               out.string(), tokenizer.string());
  return 0;
}

int run_export(const ExportArgs& args) {
  set_threads(args.threads);
  if (args.out.empty()) throw UsageError("--out is empty: name the file to write");
  OutputFile output(args.out, "--out");
  LoadedRun run = load_run(args.run);
  if (args.format == "llama2c") {
    export_llama2c(args, run);
    output.keep();
    return 0;
  }
  refuse_unless_empty(nanogpt_incompatibilities(run.model->config()),
                      args.run + " is not a GPT-2-block run, which nanoGPT's GPT is:");
  const fs::path run_dir(args.run), out(args.out);
  const TrainingState state =
      fs::is_regular_file(run_dir / "state.json") ? load_training_state(run_dir) : TrainingState{};
  // nanoGPT's data/DATASET: the run's name (its parent's, for best/).
  fs::path named = fs::absolute(run_dir).lexically_normal();
  if (named.filename().empty()) named = named.parent_path();
  if (named.filename() == "best") named = named.parent_path();
  const std::string dataset = named.filename().string();
  write_nanogpt_checkpoint(out, run.model, run.config, adamw_moments(run_dir), state.step,
                           state.step, state.best_val_loss, dataset, args.mask_buffers);
  spdlog::info("wrote {} (nanoGPT's ckpt.pt, step {})", out.string(), state.step);
  if (const auto* chars = dynamic_cast<const CharTokenizer*>(run.tokenizer.get())) {
    std::vector<std::string> itos;
    for (const char32_t cp : chars->vocab()) {
      std::string text;
      append_utf8(text, cp);
      itos.push_back(text);
    }
    const fs::path meta = out.parent_path() / "meta.pkl";
    write_nanogpt_meta(meta, itos);
    spdlog::info(
        "wrote {} (the char vocabulary; nanoGPT's sample.py reads it from "
        "data/{}/meta.pkl)",
        meta.string(), dataset);
  } else {
    spdlog::warn(
        "{} has a {} tokenizer, which nanoGPT cannot read: its sample.py will "
        "decode the ids with GPT-2's BPE instead",
        args.run, run.tokenizer->kind_name());
  }
  output.keep();
  return 0;
}

}  // namespace

Command add_export_command(CLI::App& app) {
  auto args = std::make_shared<ExportArgs>();
  CLI::App* cmd = app.add_subcommand("export", "Write a run in another project's format");
  cmd->add_option("run", args->run, "Run directory (or its best/)")->required();
  cmd->add_option("--format", args->format,
                  "nanogpt: nanoGPT's ckpt.pt (and meta.pkl); llama2c: llama2.c's model.bin "
                  "(and tokenizer.bin)")
      ->check(CLI::IsMember({"nanogpt", "llama2c"}));
  cmd->add_option("--out", args->out, "The file to write (ckpt.pt, model.bin)")->required();
  cmd->add_flag("--mask-buffers", args->mask_buffers,
                "Add each block's causal mask (attn.bias), which nanoGPT under PyTorch < 2 "
                "registers and so requires");
  add_threads_flag(cmd, args->threads);
  return [args] { return run_export(*args); };
}

}  // namespace tinylm
