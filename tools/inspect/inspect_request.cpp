#include "tools/inspect/inspect_request.h"

#include <ATen/CPUGeneratorImpl.h>

#include <spdlog/spdlog.h>

#include "data/corpus.h"
#include "data/token_cache.h"
#include "model/analysis/induction_probe.h"
#include "tools/cli.h"
#include "tools/inspect/inspection_cache.h"
#include "train/run/evaluate.h"
#include "train/run/run_corpus.h"

namespace tinylm {
namespace fs = std::filesystem;

namespace {

// N random windows of T + 1 tokens (T = block_size, or less for a short text); their starts
// go to *starts when given.
torch::Tensor random_windows(const torch::Tensor& tokens, int64_t block_size, int64_t n,
                             torch::Generator& generator, const std::string& source,
                             std::vector<int64_t>* starts_out = nullptr) {
  if (tokens.numel() < 3) {
    throw std::runtime_error(source + " has " + std::to_string(tokens.numel()) +
                             " tokens; inspecting needs at least 3");
  }
  const int64_t T = std::min(block_size, tokens.numel() - 1);
  const torch::Tensor starts = torch::randint(tokens.numel() - T, {n}, generator, torch::kInt64);
  std::vector<torch::Tensor> rows;
  for (int64_t i = 0; i < n; ++i) {
    rows.push_back(tokens.slice(0, starts[i].item<int64_t>(), starts[i].item<int64_t>() + T + 1));
    if (starts_out) starts_out->push_back(starts[i].item<int64_t>());
  }
  return torch::stack(rows);  // (n, T + 1)
}

// Which views the flags ask for.
struct Views {
  bool everything, heads, ablate, priors, lens, attention, patch, composition, attribution,
      circuits, geometry, positions, drift, analogy, training, features;
  int64_t exact = kExactHeads;  // heads ablated exactly; -1: all
};

Views chosen_views(const InspectArgs& args) {
  const bool everything = args.all || !args.html.empty();
  const bool texts = !args.clean.empty() || !args.corrupt.empty();
  Views v{everything,
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
          !args.analogy.empty(),
          everything || args.training,
          !args.features.empty()};
  if (!v.heads && !v.ablate && !v.priors && !v.lens && !v.attention && !v.patch && !v.composition &&
      !v.attribution && !v.circuits && !v.geometry && !v.positions && !v.drift && !v.analogy &&
      !v.training && !v.features) {
    throw UsageError(
        "inspect: choose a view: --prompt TEXT, --heads, --ablate, --priors, --logit-lens, "
        "--composition, --attribution, --circuits, --geometry, --positions, --context-drift "
        "TOKEN, --analogy a:b::c, --patch, --training, --features SAE, --all, or --html FILE for "
        "all of them");
  }
  if (args.context > 0 && !v.positions) throw UsageError("--context goes with --positions");
  if (args.tokens != kViewTokens && !v.positions && !v.drift && !v.features)
    throw UsageError("--tokens goes with --positions, --context-drift or --features");
  if (v.patch && (args.clean.empty() || args.corrupt.empty()))
    throw UsageError("--patch needs both --clean TEXT and --corrupt TEXT");
  if (texts && !v.patch) throw UsageError("--clean and --corrupt go with --patch");
  if (args.position >= 0 && !v.patch) throw UsageError("--position goes with --patch");
  if (v.lens && args.prompt.empty() && !everything)
    throw UsageError("--logit-lens needs --prompt TEXT");
  v.exact = exact_heads(args.exact);
  if (args.ablation != "zero" && args.ablation != "mean")
    throw UsageError("--ablation is zero or mean, got \"" + args.ablation + "\"");
  return v;
}

// The tokens head scores, ablation and the default prompt read: --text, or the val split.
std::pair<torch::Tensor, std::string> text_tokens(const LoadedRun& run, const fs::path& run_dir,
                                                  const InspectArgs& args) {
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
    throw std::runtime_error(std::string(e.what()) + " (the run's config.toml in " +
                             run_dir.string() + "); pass --text FILE to inspect on another text");
  }
}

// The heads of --ablate-heads, ablated while the handles live: zeroed, or replaced by their
// mean over the windows of --windows and --seed.
std::vector<HookHandle> ablate_heads(LoadedRun& run, const fs::path& run_dir,
                                     const InspectArgs& args, Inspection& out) {
  std::vector<HeadRef> heads;
  try {
    heads = parse_head_list(args.ablate_heads);
    check_heads(run.model->config(), heads);
  } catch (const std::invalid_argument& e) {
    throw UsageError(std::string("--ablate-heads: ") + e.what());
  }
  std::string labels;
  for (const HeadRef& h : heads) labels += (labels.empty() ? "" : ", ") + h.label();
  if (args.ablation == "zero") {
    out.notes.push_back("heads " + labels + " zero-ablated in every view");
    return zero_ablate(run.model, heads);
  }
  const auto [tokens, source] = text_tokens(run, run_dir, args);
  auto rng = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(args.seed));
  const torch::Tensor windows =
      random_windows(tokens, run.model->config().block_size, args.windows, rng, source);
  // The windows' inputs: their first T of T + 1 tokens.
  const torch::Tensor means =
      mean_head_outputs(run.model, windows.slice(1, 0, windows.size(1) - 1));  // (L, nh, hs)
  std::vector<HookHandle> handles;
  for (const HeadRef& h : heads)
    handles.push_back(ablate_head(run.model, h, means[h.layer][h.head]));
  out.notes.push_back("heads " + labels + " mean-ablated in every view (their mean over " +
                      std::to_string(args.windows) + " windows of " + source + ")");
  return handles;
}

// The windows and probe of --windows, --probes and --seed from `tokens`.
void sample_windows(InspectData& data, const torch::Tensor& tokens, const ModelConfig& mc,
                    const InspectArgs& args) {
  auto rng = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(args.seed));
  data.windows =
      random_windows(tokens, mc.block_size, args.windows, rng, data.source, &data.window_starts);
  data.probe = repeated_random_tokens(args.probes, probe_half_length(mc), mc.vocab_size, rng);
}

}  // namespace

int64_t exact_heads(const std::string& flag) {
  if (flag == "all") return -1;
  const bool digits =
      !flag.empty() && flag.size() < 7 && flag.find_first_not_of("0123456789") == std::string::npos;
  if (!digits) throw UsageError("--exact is a number of heads or all, got \"" + flag + "\"");
  return std::stoll(flag);
}

InspectData inspect_data(const LoadedRun& run, const fs::path& run_dir, const InspectArgs& args) {
  InspectData data;
  torch::Tensor tokens;
  std::tie(tokens, data.source) = text_tokens(run, run_dir, args);
  sample_windows(data, tokens, run.model->config(), args);
  return data;
}

void check_inspect_args(const InspectArgs& args) { (void)chosen_views(args); }

Inspection run_inspection(LoadedRun& run, const fs::path& run_dir, const InspectArgs& args,
                          InspectionCache* kept) {
  const Views v = chosen_views(args);
  const ModelConfig& mc = run.model->config();
  Inspection out;
  out.run_dir = run_dir;
  if (fs::is_regular_file(run_dir / "state.json")) out.step = load_training_state(run_dir).step;
  const std::vector<HookHandle> ablated =
      args.ablate_heads.empty() ? std::vector<HookHandle>{} : ablate_heads(run, run_dir, args, out);
  // Heads ablated make another model than the checkpoint's: nothing kept of it is shared.
  InspectionCache own;
  InspectionCache& cache = kept && args.ablate_heads.empty() ? *kept : own;
  InspectData data;
  torch::Tensor tokens;
  const bool reads_prompt = v.attention || v.lens || v.attribution;
  if (v.heads || v.ablate || v.positions || v.drift || v.features ||
      (reads_prompt && args.prompt.empty())) {
    std::tie(tokens, data.source) = text_tokens(run, run_dir, args);
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
  if (v.heads || v.ablate) sample_windows(data, tokens, mc, args);
  // One pass over the prompt for all of its views, kept across requests by the lab's.
  std::shared_ptr<const CachedRun> pass;
  if (reads_prompt) pass = cache.prompts.of(run.model, prompt);
  if (v.attention) out.attention = inspect_attention(run, prompt, *pass);
  if (v.lens) out.lens = inspect_logit_lens(run, prompt, *pass);
  if (v.heads || v.ablate) {
    if (v.ablate) {
      spdlog::info(
          "ablation: {} heads estimated by attribution, {} of them ablated two ways, on "
          "{} windows...",
          mc.n_layer * mc.n_head,
          v.exact < 0 ? mc.n_layer * mc.n_head : std::min(v.exact, mc.n_layer * mc.n_head),
          args.windows);
    }
    std::tie(out.heads, out.ablation) =
        inspect_windows(run, data, v.heads, v.ablate, v.exact, &cache);
  }
  if (v.priors) out.priors = inspect_priors(out, run);
  if (v.composition) out.composition = composition_scores(run.model);
  if (v.circuits) out.circuits = token_circuits(run.model);
  if (v.geometry) {
    out.positions = position_geometry(run.model);
    out.embeddings = embedding_geometry(run.model);
  }
  if (v.positions) {
    // By default as far as the positions go: 4x block_size where they extrapolate.
    const int64_t context = args.context > 0 ? window_context(mc, args.context, run_dir.string())
                            : mc.positions().extrapolates ? 4 * mc.block_size
                                                          : mc.block_size;
    out.position_loss = *cache.position_loss(data.source, context, args.tokens, [&] {
      return inspect_position_loss(run, tokens, data.source, context, args.tokens);
    });
  }
  if (v.drift) {
    out.drift = *cache.drift(data.source, args.drift_token, args.tokens, [&] {
      return inspect_context_drift(run, tokens, data.source, args.drift_token, args.tokens);
    });
  }
  if (v.analogy) out.analogy = inspect_analogy(run, args.analogy);
  if (v.features) out.features = inspect_features(run, run_dir, args.features, tokens, data.source, args.tokens);
  // --all on a one-token prompt shows the rest; --attribution asked for by name says why not.
  if (v.attribution && (args.attribution || prompt.numel() >= 2)) {
    out.attribution = inspect_attribution(run, prompt, *pass);
  } else if (v.attribution) {
    out.notes.push_back("the prompt is one token: no logit attribution (it needs a next token)");
  }
  if (v.patch) out.patching = inspect_patching(run, args.clean, args.corrupt, args.position);
  if (v.everything && !v.patch)
    out.notes.push_back("no --clean and --corrupt texts: the report has no activation patching");
  if (v.training) {
    out.training_asked = true;
    out.training = read_training_curves(out, run_dir);
    out.snapshots = read_snapshots(out, run_dir);
  }
  return out;
}

void add_inspect_options(CLI::App* cmd, InspectArgs& a) {
  InspectArgs* args = &a;
  cmd->add_option("--prompt", args->prompt, "Text whose attention maps (and logit lens) to show");
  cmd->add_flag("--heads", args->heads,
                "Head scores: previous-token, induction, ... and the induction probe");
  cmd->add_flag("--ablate", args->ablate,
                "The loss when each head is zeroed or mean-ablated: every head estimated by "
                "attribution, the top --exact run");
  cmd->add_option("--exact", args->exact,
                  "Heads --ablate runs exactly, the top ones by attribution (a number, or all; "
                  "default " +
                      std::to_string(kExactHeads) + ")");
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
  cmd->add_option("--tokens", args->tokens,
                  "Tokens of the text that --positions, --context-drift and --features read (default " +
                      std::to_string(kViewTokens) + ")")
      ->check(integer_flag(between(1, int64_t{1} << 26)));
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
  cmd->add_option("--features", args->features,
                  "An SAE of this run (`tinylm features`): its directory, or its name under "
                  "RUN/saes/; each feature's top contexts, heads, tokens and histogram, on "
                  "--tokens tokens of the text");
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
  cmd->add_flag("--training", args->training,
                "The training curves (metrics.jsonl) and the heads' snapshots over steps");
  cmd->add_option("--ablate-heads", args->ablate_heads,
                  "Heads L.H[,L.H...] ablated in every view computed (see --ablation)");
  cmd->add_option("--ablation", args->ablation,
                  "How --ablate-heads ablates: zero, or mean (each head's mean output over "
                  "--windows windows)");
}

}  // namespace tinylm
