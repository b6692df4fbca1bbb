// `tinylm inspect RUN [--prompt TEXT] [--heads] [--ablate] [--priors] [--logit-lens] [--all]
//                     [--composition] [--attribution] [--circuits] [--geometry]
//                     [--positions [--context N]] [--context-drift TOKEN] [--analogy a:b::c]
//                     [--patch --clean TEXT --corrupt TEXT [--position P]]
//                     [--text FILE] [--windows N] [--probes N] [--seed S]
//                     [--html FILE] [--json FILE]`
// Looks inside a trained run through its hook points: attention maps of a prompt, head
// scores, ablations, priors, the logit lens, composition scores, direct logit attribution,
// activation patching, geometry, loss by position and context drift, as tables on stdout, a JSON
// document, or a self-contained HTML report (which holds every view).

#include <ATen/CPUGeneratorImpl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>

#include <spdlog/spdlog.h>

#include "data/corpus.h"
#include "data/io/atomic_file.h"
#include "model/analysis/induction_probe.h"
#include "tools/cli.h"
#include "tools/commands.h"
#include "tools/inspect/html_report.h"
#include "tools/inspect/inspection.h"
#include "tools/inspect/inspection_json.h"
#include "tools/inspect/inspection_tables.h"
#include "train/run/checkpoint.h"
#include "train/run/evaluate.h"
#include "train/run/run_corpus.h"

namespace tinylm {
namespace fs = std::filesystem;

namespace {

// N random windows of T + 1 tokens (T = block_size, or less for a short text).
torch::Tensor random_windows(const torch::Tensor& tokens, int64_t block_size, int64_t n,
                             torch::Generator& generator, const std::string& source) {
  if (tokens.numel() < 3) {
    throw std::runtime_error(source + " has " + std::to_string(tokens.numel()) +
                             " tokens; inspecting needs at least 3");
  }
  const int64_t T = std::min(block_size, tokens.numel() - 1);
  const torch::Tensor starts = torch::randint(tokens.numel() - T, {n}, generator, torch::kInt64);
  std::vector<torch::Tensor> rows;
  for (int64_t i = 0; i < n; ++i)
    rows.push_back(tokens.slice(0, starts[i].item<int64_t>(), starts[i].item<int64_t>() + T + 1));
  return torch::stack(rows);  // (n, T + 1)
}

struct InspectArgs {
  std::string run, prompt, text, html, json, clean, corrupt, drift_token, analogy;
  bool heads = false, ablate = false, priors = false, logit_lens = false, all = false,
       patch = false, composition = false, attribution = false, circuits = false, geometry = false,
       positions = false, drift = false;
  int64_t windows = 32, probes = 8, seed = kDefaultSeed, position = -1, context = 0;
  int threads = 0;
  std::string device = "cpu";
};

// Which views the flags ask for.
struct Views {
  bool everything, heads, ablate, priors, lens, attention, patch, composition, attribution,
      circuits, geometry, positions, drift, analogy;
};

Views chosen_views(const InspectArgs& args) {
  const bool everything = args.all || !args.html.empty();
  const bool texts = !args.clean.empty() || !args.corrupt.empty();
  const Views v{everything,
                everything || args.heads,
                everything || args.ablate,
                everything || args.priors,
                everything || args.logit_lens,
                everything || !args.prompt.empty(),
                args.patch || (everything && texts),
                everything || args.composition,
                everything || args.attribution,
                everything || args.circuits,
                everything || args.geometry,
                everything || args.positions,
                everything || args.drift,
                !args.analogy.empty()};
  if (!v.heads && !v.ablate && !v.priors && !v.lens && !v.attention && !v.patch && !v.composition &&
      !v.attribution && !v.circuits && !v.geometry && !v.positions && !v.drift && !v.analogy) {
    throw UsageError(
        "inspect: choose a view: --prompt TEXT, --heads, --ablate, --priors, --logit-lens, "
        "--composition, --attribution, --circuits, --geometry, --positions, --context-drift "
        "TOKEN, --analogy a:b::c, --patch, --all, or --html FILE for all of them");
  }
  if (args.context > 0 && !v.positions) throw UsageError("--context goes with --positions");
  if (v.patch && (args.clean.empty() || args.corrupt.empty()))
    throw UsageError("--patch needs both --clean TEXT and --corrupt TEXT");
  if (texts && !v.patch) throw UsageError("--clean and --corrupt go with --patch");
  if (args.position >= 0 && !v.patch) throw UsageError("--position goes with --patch");
  if (v.lens && args.prompt.empty() && !everything)
    throw UsageError("--logit-lens needs --prompt TEXT");
  return v;
}

// The tokens head scores, ablation and the default prompt read: --text, or the val split.
std::pair<torch::Tensor, std::string> text_tokens(const LoadedRun& run, const InspectArgs& args) {
  if (!args.text.empty()) {
    return {encode_corpus_in_memory(*run.tokenizer, args.text, "--text").tokens.to_tensor(),
            args.text};
  }
  try {
    RunDataOptions options;
    options.tokenizer = run.tokenizer;
    const TokenSequence val = load_run_data(run.config, options).val.tokens;
    // Windows come from the first 4M tokens: plenty, and a bounded copy.
    return {val.slice(0, std::min<int64_t>(val.size(), int64_t{1} << 22)).to_tensor(),
            "the val split of " + describe_corpus(run.config)};
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(std::string(e.what()) + " (the run's config.toml in " + args.run +
                             "); pass --text FILE to inspect on another text");
  }
}

// Every view asked for, computed.
Inspection inspect(LoadedRun& run, const InspectArgs& args, const Views& v) {
  const ModelConfig& mc = run.model->config();
  Inspection out;
  out.run_dir = args.run;
  if (fs::is_regular_file(fs::path(args.run) / "state.json"))
    out.step = load_training_state(args.run).step;
  InspectData data;
  torch::Tensor tokens;
  const bool reads_prompt = v.attention || v.lens || v.attribution;
  if (v.heads || v.ablate || v.positions || v.drift || (reads_prompt && args.prompt.empty())) {
    std::tie(tokens, data.source) = text_tokens(run, args);
  }
  // The prompt is encoded once, here: the attention maps, the lens and attribution read it.
  torch::Tensor prompt;  // (T,)
  if (reads_prompt && !args.prompt.empty()) {
    prompt = encode_prompt(out, run, args.prompt);
  } else if (reads_prompt) {
    prompt = tokens.slice(0, 0, std::min<int64_t>(mc.block_size, 128)).clone();
    out.notes.push_back(
        "no --prompt: the attention maps, logit lens and attribution read the first " +
        std::to_string(prompt.numel()) + " tokens of " + data.source);
  }
  if (v.heads || v.ablate) {
    auto rng = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(args.seed));
    data.windows = random_windows(tokens, mc.block_size, args.windows, rng, data.source);
    data.probe = repeated_random_tokens(args.probes, probe_half_length(mc), mc.vocab_size, rng);
  }
  if (v.attention) out.attention = inspect_attention(run, prompt);
  if (v.heads) out.heads = inspect_heads(run, data);
  if (v.ablate) {
    spdlog::info("ablating {} heads, two ways, on {} windows...", mc.n_layer * mc.n_head,
                 args.windows);
    out.ablation = inspect_ablation(run, data);
  }
  if (v.priors) out.priors = inspect_priors(out, run);
  if (v.lens) out.lens = inspect_logit_lens(run, prompt);
  if (v.composition) out.composition = composition_scores(run.model);
  if (v.circuits) out.circuits = token_circuits(run.model);
  if (v.geometry) {
    out.positions = position_geometry(run.model);
    out.embeddings = embedding_geometry(run.model);
  }
  if (v.positions) {
    // By default as far as the positions go: 4x block_size where they extrapolate.
    const int64_t context = args.context > 0 ? window_context(mc, args.context, args.run)
                            : mc.positions().extrapolates ? 4 * mc.block_size
                                                          : mc.block_size;
    out.position_loss = inspect_position_loss(run, tokens, data.source, context);
  }
  if (v.drift) out.drift = inspect_context_drift(run, tokens, data.source, args.drift_token);
  if (v.analogy) out.analogy = inspect_analogy(run, args.analogy);
  // --all on a one-token prompt shows the rest; --attribution asked for by name says why not.
  if (v.attribution && (args.attribution || prompt.numel() >= 2)) {
    out.attribution = inspect_attribution(run, prompt);
  } else if (v.attribution) {
    out.notes.push_back("the prompt is one token: no logit attribution (it needs a next token)");
  }
  if (v.patch) out.patching = inspect_patching(run, args.clean, args.corrupt, args.position);
  if (v.everything && !v.patch)
    out.notes.push_back("no --clean and --corrupt texts: the report has no activation patching");
  if (v.everything) {
    out.training_asked = true;
    out.training = read_training_curves(out, args.run);
    out.snapshots = read_snapshots(out, args.run);
  }
  return out;
}

void write_outputs(const Inspection& out, const LoadedRun& run, const InspectArgs& args) {
  if (args.json != "-") {
    std::fflush(stderr);
    print_inspection(out, run);
  }
  if (!args.json.empty()) {
    const std::string text = inspection_json(out, run).dump() + "\n";
    if (args.json == "-") {
      std::fwrite(text.data(), 1, text.size(), stdout);
    } else {
      write_file_atomic(args.json, text);
      spdlog::info("wrote {} ({:.1f} MB)", args.json, static_cast<double>(text.size()) / 1e6);
    }
  }
  if (!args.html.empty()) {
    const std::string page = html_report(inspection_json(out, run, pack_heatmaps));
    write_file_atomic(args.html, page);
    spdlog::info("wrote {} ({:.1f} MB): open it in a browser", args.html,
                 static_cast<double>(page.size()) / 1e6);
  }
}

int run_inspect(const InspectArgs& args) {
  set_threads(args.threads);
  const Views views = chosen_views(args);
  OutputFile html(args.html, "--html"), json(args.json, "--json");
  const auto start = std::chrono::steady_clock::now();
  // The analyses read activations and weights on the CPU, and the models tinylm inspects
  // are small: a CUDA device is checked, then the work stays here.
  if (!parse_device(args.device).is_cpu()) {
    spdlog::warn(
        "inspect runs on the CPU: its analyses read activations there (--device {} "
        "is not used)",
        args.device);
  }
  LoadedRun run = load_run(args.run);
  run.model->eval();
  const Inspection out = inspect(run, args, views);
  for (const std::string& note : out.notes) spdlog::info("{}", note);
  write_outputs(out, run, args);
  html.keep();
  json.keep();
  spdlog::info("inspected {} in {:.1f} s", args.run,
               std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return 0;
}

}  // namespace

Command add_inspect_command(CLI::App& app) {
  auto args = std::make_shared<InspectArgs>();
  CLI::App* cmd = app.add_subcommand(
      "inspect", "Look inside a trained run: attention, head scores, ablation, priors");
  cmd->add_option("run", args->run, "Run directory (or its best/)")->required();
  cmd->add_option("--prompt", args->prompt, "Text whose attention maps (and logit lens) to show");
  cmd->add_flag("--heads", args->heads,
                "Head scores: previous-token, induction, ... and the induction probe");
  cmd->add_flag("--ablate", args->ablate, "The loss when each head is zeroed or mean-ablated");
  cmd->add_flag("--priors", args->priors,
                "What W_Q, W_K, W_V, W_O encode from positions and tokens alone");
  cmd->add_flag("--logit-lens", args->logit_lens,
                "Predictions read off the residual stream after each layer");
  cmd->add_flag("--composition", args->composition,
                "Q-, K- and V-composition scores between heads of different layers");
  cmd->add_flag("--attribution", args->attribution,
                "Direct logit attribution: each head's and MLP's part of the next token's logit "
                "on the prompt");
  cmd->add_flag("--circuits", args->circuits,
                "Each head's OV and QK circuits in tokens: their top singular directions");
  cmd->add_flag("--geometry", args->geometry,
                "Position vectors' similarities and linear shifts; token embeddings' nearest "
                "neighbours and PCA map");
  cmd->add_flag("--positions", args->positions,
                "Mean loss at each position of long windows (--context; default 4x block_size "
                "where the positions extrapolate): where the model stops coping");
  cmd->add_option("--context", args->context, "Window length of --positions")
      ->check(integer_flag(at_least(1)));
  cmd->add_option("--context-drift", args->drift_token,
                  "How alike one token's vectors are at each layer across its contexts "
                  "(with --all: the most frequent token)")
      ->each([args](const std::string&) { args->drift = true; });
  cmd->add_option("--analogy", args->analogy,
                  "a:b::c, \"a is to b as c is to ...\": the tokens nearest e_b - e_a + e_c");
  cmd->add_flag("--patch", args->patch,
                "Activation patching: how much of the clean text's answer each head, residual "
                "and layer output restores in the corrupted text");
  cmd->add_option("--clean", args->clean, "The clean text of --patch");
  cmd->add_option("--corrupt", args->corrupt,
                  "The corrupted text of --patch: as many tokens as --clean");
  cmd->add_option("--position", args->position,
                  "The token after which --patch reads the answer (default: the last)")
      ->check(integer_flag(at_least(0)));
  cmd->add_flag("--all", args->all, "Every view (implied by --html)");
  cmd->add_option("--text", args->text,
                  "Score heads and ablations on this UTF-8 file instead of the val split");
  cmd->add_option("--windows", args->windows, "Random windows for head scores and ablation")
      ->check(integer_flag(between(1, 100000)));
  cmd->add_option("--probes", args->probes, "Sequences in the induction probe")
      ->check(integer_flag(between(1, 10000)));
  cmd->add_option(
         "--seed", args->seed,
         "Seed for the windows and the probe (default " + std::to_string(kDefaultSeed) + ")")
      ->check(integer_flag(at_least(0)));
  cmd->add_option("--html", args->html, "Write the self-contained HTML report here");
  cmd->add_option("--json", args->json, "Write the JSON document here (- for stdout)");
  add_threads_flag(cmd, args->threads);
  cmd->add_option("--device", args->device, "Accepted for symmetry; the analyses run on the CPU");
  return [args] { return run_inspect(*args); };
}

}  // namespace tinylm
