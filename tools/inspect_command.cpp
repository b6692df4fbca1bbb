// `tinylm inspect RUN [--prompt TEXT] [--heads] [--ablate] [--priors] [--logit-lens] [--all]
//                     [--text FILE] [--windows N] [--probes N] [--seed S]
//                     [--html FILE] [--json FILE]`
// Looks inside a trained run through its hook points: attention maps of a prompt, head
// scores, ablations, priors and the logit lens, as tables on stdout, a JSON document, or a
// self-contained HTML report (which holds every view).

#include <ATen/CPUGeneratorImpl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>

#include <spdlog/spdlog.h>

#include "data/corpus.h"
#include "model/induction_probe.h"
#include "tools/commands.h"
#include "tools/html_report.h"
#include "tools/inspection.h"
#include "data/atomic_file.h"
#include "train/checkpoint.h"
#include "train/run_corpus.h"

namespace tinylm {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// The first `n` tokens of the val split as text: the prompt when the user gives none.
std::string default_prompt(const LoadedRun& run, const torch::Tensor& val, int64_t n) {
  std::vector<int64_t> ids(val.data_ptr<int64_t>(), val.data_ptr<int64_t>() + std::min(n, val.numel()));
  return run.tokenizer->decode(ids);
}

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
  for (int64_t i = 0; i < n; ++i) rows.push_back(tokens.slice(0, starts[i].item<int64_t>(), starts[i].item<int64_t>() + T + 1));
  return torch::stack(rows);  // (n, T + 1)
}

// Fails before the work if a file could not be written there.
void check_writable(const std::string& path, const char* flag) {
  if (path.empty() || path == "-") return;
  const fs::path parent = fs::absolute(path).parent_path();
  if (!fs::is_directory(parent)) {
    throw std::runtime_error("cannot write " + path + " (" + flag + "): directory " + parent.string() +
                             " does not exist");
  }
  if (fs::is_directory(path)) {
    throw std::runtime_error("cannot write " + path + " (" + flag + "): it is a directory");
  }
  const fs::path probe = parent / (".tinylm-write-check-" + std::to_string(::getpid()));
  std::ofstream out(probe);
  if (!out) throw std::runtime_error("cannot write " + path + " (" + flag + "): " + parent.string() + " is not writable");
  out.close();
  fs::remove(probe);
}

std::string cell(const json& v, const char* format = "%7.3f") {
  if (v.is_null()) return "      -";
  char text[32];
  std::snprintf(text, sizeof text, format, v.get<double>());
  return text;
}

void print_attention(const json& a) {
  std::printf("attention patterns of %zu tokens:", a["tokens"].size());
  for (const auto& t : a["tokens"]) std::printf(" %s", visible_token(t.get<std::string>()).c_str());
  std::printf("\n  (every head's T x T pattern is in --json and --html)\n\n");
}

void print_heads(const json& h) {
  const json& s = h["scores"];
  const json& p = h["probe"]["scores"];
  std::printf("head scores on %lld windows of %lld tokens from %s, and on the induction probe "
              "(%lld sequences of %lld random tokens repeated twice)\n",
              static_cast<long long>(h["windows"].get<int64_t>()), static_cast<long long>(h["length"].get<int64_t>()),
              h["source"].get<std::string>().c_str(), static_cast<long long>(h["probe"]["sequences"].get<int64_t>()),
              static_cast<long long>(h["probe"]["length"].get<int64_t>() / 2));
  std::printf("head   prev-tok    self   first     dup  induct entropy | probe: prev-tok  induct\n");
  for (size_t l = 0; l < s["previous_token"].size(); ++l) {
    for (size_t k = 0; k < s["previous_token"][l].size(); ++k) {
      std::printf("%zu.%-3zu %s %s %s %s %s %s |        %s %s\n", l, k, cell(s["previous_token"][l][k], "%9.3f").c_str(),
                  cell(s["self"][l][k]).c_str(), cell(s["first_token"][l][k]).c_str(),
                  cell(s["duplicate_token"][l][k]).c_str(), cell(s["induction"][l][k]).c_str(),
                  cell(s["entropy"][l][k]).c_str(), cell(p["previous_token"][l][k], "%9.3f").c_str(),
                  cell(p["induction"][l][k]).c_str());
    }
  }
  const auto best = [](const json& b) {
    return std::to_string(b["layer"].get<int64_t>()) + "." + std::to_string(b["head"].get<int64_t>()) +
           " (" + cell(b["score"], "%.3f") + ")";
  };
  std::printf("strongest previous-token head: %s; strongest induction head on the probe: %s\n",
              best(h["strongest"]["previous_token"]).c_str(), best(h["probe"]["strongest"]["induction"]).c_str());
  std::printf("probe loss: %.3f nats on the first half, %.3f on the repeat\n\n",
              h["probe"]["loss_first_half"].get<double>(), h["probe"]["loss_second_half"].get<double>());
}

void print_ablation(const json& a) {
  std::printf("ablation on %lld windows from %s: loss %.4f, probe loss on the repeat %.4f\n",
              static_cast<long long>(a["windows"].get<int64_t>()), a["source"].get<std::string>().c_str(),
              a["loss"].get<double>(), a["probe_loss"].get<double>());
  std::printf("head   d_loss zero  d_loss mean | d_probe zero  d_probe mean   (sorted by d_loss zero)\n");
  for (const json& r : a["heads"]) {
    std::printf("%lld.%-3lld %s %s |  %s  %s\n", static_cast<long long>(r["layer"].get<int64_t>()),
                static_cast<long long>(r["head"].get<int64_t>()), cell(r["zero"], "%+11.4f").c_str(),
                cell(r["mean"], "%+12.4f").c_str(), cell(r["probe_zero"], "%+11.4f").c_str(),
                cell(r["probe_mean"], "%+12.4f").c_str());
  }
  std::printf("\n");
}

void print_priors(const json& p) {
  std::printf("priors from the weights alone (README: Priors)\n");
  std::printf("head   position prev-tok   OV copying   OV top-1\n");
  const json& ov = p["ov"];
  for (size_t l = 0; l < ov["copying"].size(); ++l) {
    for (size_t k = 0; k < ov["copying"][l].size(); ++k) {
      const json pos = p["positions"].is_null() ? json(nullptr) : p["positions"]["previous_token"][l][k];
      std::printf("%zu.%-3zu %s %s %s\n", l, k, cell(pos, "%17.3f").c_str(), cell(ov["copying"][l][k], "%12.3f").c_str(),
                  cell(ov["top1"][l][k], "%10.3f").c_str());
    }
  }
  std::printf("\n");
}

void print_logit_lens(const json& lens) {
  const json& tokens = lens["tokens"];
  const size_t last = tokens.size() - 1;
  std::printf("logit lens at the last position (after \"%s\"): top predictions per stage\n",
              visible_token(tokens[last].get<std::string>()).c_str());
  for (const json& stage : lens["stages"]) {
    std::printf("  %-9s", stage["name"].get<std::string>().c_str());
    for (const json& t : stage["top"][last]) {
      std::printf("  %s %.3f", visible_token(t["token"].get<std::string>()).c_str(), t["p"].get<double>());
    }
    std::printf("\n");
  }
  std::printf("top-1 per position (rows: stages; columns: positions)\n  %-9s", "input");
  for (const auto& t : tokens) std::printf(" %s", visible_token(t.get<std::string>()).c_str());
  std::printf("\n");
  for (const json& stage : lens["stages"]) {
    std::printf("  %-9s", stage["name"].get<std::string>().c_str());
    for (const json& top : stage["top"]) std::printf(" %s", visible_token(top[0]["token"].get<std::string>()).c_str());
    std::printf("\n");
  }
  std::printf("\n");
}

}  // namespace

std::function<int()> add_inspect_command(CLI::App& app) {
  struct Args {
    std::string run, prompt, text, html, json;
    bool heads = false, ablate = false, priors = false, logit_lens = false, all = false;
    int64_t windows = 32, probes = 8, seed = 0;
    int threads = 0;
    std::string device = "cpu";
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("inspect", "Look inside a trained run: attention, head scores, ablation, priors");
  cmd->add_option("run", args->run, "Run directory (or its best/)")->required();
  cmd->add_option("--prompt", args->prompt, "Text whose attention maps (and logit lens) to show");
  cmd->add_flag("--heads", args->heads, "Head scores: previous-token, induction, ... and the induction probe");
  cmd->add_flag("--ablate", args->ablate, "The loss when each head is zeroed or mean-ablated");
  cmd->add_flag("--priors", args->priors, "What W_Q, W_K, W_V, W_O encode from positions and tokens alone");
  cmd->add_flag("--logit-lens", args->logit_lens, "Predictions read off the residual stream after each layer");
  cmd->add_flag("--all", args->all, "Every view (implied by --html)");
  cmd->add_option("--text", args->text, "Score heads and ablations on this UTF-8 file instead of the val split");
  cmd->add_option("--windows", args->windows, "Random windows for head scores and ablation")->check(CLI::Range(1, 100000));
  cmd->add_option("--probes", args->probes, "Sequences in the induction probe")->check(CLI::Range(1, 10000));
  cmd->add_option("--seed", args->seed, "Seed for the windows and the probe")->check(CLI::NonNegativeNumber);
  cmd->add_option("--html", args->html, "Write the self-contained HTML report here");
  cmd->add_option("--json", args->json, "Write the JSON document here (- for stdout)");
  cmd->add_option("--threads", args->threads, "Intra-op threads (default: all cores)");
  cmd->add_option("--device", args->device, "Accepted for symmetry; the analyses run on the CPU");

  return [args]() {
    set_threads(args->threads);
    const bool everything = args->all || !args->html.empty();
    const bool heads = everything || args->heads, ablate = everything || args->ablate,
               priors = everything || args->priors, lens = everything || args->logit_lens;
    const bool attention = everything || !args->prompt.empty();
    if (!heads && !ablate && !priors && !lens && !attention) {
      throw UsageError("inspect: choose a view: --prompt TEXT, --heads, --ablate, --priors, --logit-lens, "
                       "--all, or --html FILE for all of them");
    }
    if (lens && args->prompt.empty() && !everything) throw UsageError("--logit-lens needs --prompt TEXT");
    check_writable(args->html, "--html");
    check_writable(args->json, "--json");

    const auto start = std::chrono::steady_clock::now();
    // The analyses read activations and weights on the CPU, and the models tinylm inspects
    // are small: a CUDA device is checked, then the work stays here.
    if (!parse_device(args->device).is_cpu()) {
      spdlog::warn("inspect runs on the CPU: its analyses read activations there (--device {} "
                   "is not used)", args->device);
    }
    LoadedRun run = load_run(args->run);
    run.model->eval();
    const ModelConfig& mc = run.model->config();
    Inspection out;
    add_run_summary(out, args->run, run);

    // The data that head scores, ablation and the default prompt read.
    InspectData data;
    torch::Tensor text_tokens;
    std::string prompt = args->prompt;
    if (heads || ablate || ((attention || lens) && prompt.empty())) {
      if (!args->text.empty()) {
        text_tokens = encode_in_memory(*run.tokenizer, read_corpus(args->text), args->text).tokens.to_tensor();
        data.source = args->text;
      } else {
        try {
          RunDataOptions options;
          options.tokenizer = run.tokenizer;
          const TokenSequence val = load_run_data(run.config, options).val.tokens;
          // Windows come from the first 4M tokens: plenty, and a bounded copy.
          text_tokens = val.slice(0, std::min<int64_t>(val.size(), int64_t{1} << 22)).to_tensor();
        } catch (const std::runtime_error& e) {
          throw std::runtime_error(std::string(e.what()) + " (the run's config.toml in " + args->run +
                                   "); pass --text FILE to inspect on another text");
        }
        data.source = "the val split of " + describe_corpus(run.config);
      }
    }
    if (prompt.empty() && (attention || lens)) {
      prompt = default_prompt(run, text_tokens, std::min<int64_t>(mc.block_size, 128));
      out.notes.push_back("no --prompt: the attention maps show the first " +
                          std::to_string(run.tokenizer->encode(prompt).size()) + " tokens of " + data.source);
    }
    if (heads || ablate) {
      auto rng = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(args->seed));
      data.windows = random_windows(text_tokens, mc.block_size, args->windows, rng, data.source);
      data.probe = repeated_random_tokens(args->probes, probe_half_length(mc), mc.vocab_size, rng);
    }

    if (attention) add_attention(out, run, prompt);
    if (heads) add_head_scores(out, run, data);
    if (ablate) {
      spdlog::info("ablating {} heads, two ways, on {} windows...", mc.n_layer * mc.n_head, args->windows);
      add_ablation(out, run, data);
    }
    if (priors) add_priors(out, run);
    if (lens) add_logit_lens(out, run, prompt);
    if (everything) add_training(out, args->run);
    for (const std::string& note : out.notes) spdlog::info("{}", note);

    const bool json_to_stdout = args->json == "-";
    if (!json_to_stdout) {
      std::fflush(stderr);
      if (out.doc.contains("attention")) print_attention(out.doc["attention"]);
      if (out.doc.contains("heads")) print_heads(out.doc["heads"]);
      if (out.doc.contains("ablation")) print_ablation(out.doc["ablation"]);
      if (out.doc.contains("priors")) print_priors(out.doc["priors"]);
      if (out.doc.contains("logit_lens")) print_logit_lens(out.doc["logit_lens"]);
      std::fflush(stdout);
    }
    if (!args->json.empty()) {
      const std::string text = spelled_out(out).dump() + "\n";
      if (json_to_stdout) {
        std::fwrite(text.data(), 1, text.size(), stdout);
      } else {
        write_file_atomic(args->json, text);
        spdlog::info("wrote {} ({:.1f} MB)", args->json, static_cast<double>(text.size()) / 1e6);
      }
    }
    if (!args->html.empty()) {
      const std::string page = html_report(out);
      write_file_atomic(args->html, page);
      spdlog::info("wrote {} ({:.1f} MB): open it in a browser", args->html, static_cast<double>(page.size()) / 1e6);
    }
    spdlog::info("inspected {} in {:.1f} s", args->run,
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    return 0;
  };
}

}  // namespace tinylm
