// `tinylm features`: an SAE trained on a run's activations and written in SAELens's layout,
// shown by `inspect --features`; bad input refused with nothing written.

#include <gtest/gtest.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "test_util.h"

namespace tinylm {
namespace {

namespace fs = std::filesystem;
using test::run_tinylm;

class Features : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir();
    corpus_ = dir_->path() / "corpus.txt";
    std::string text = test::read_text(test::shakespeare());
    test::write_text(corpus_, text.substr(0, 200000));
    const auto config = test::write_tiny_config(dir_->path(), corpus_, 30);
    const auto trained = run_tinylm({"train", config.string(), "--out", run().string()});
    ASSERT_EQ(trained.exit_code, 0) << trained.output;
    // train ends by saying where its time went (train/run_breakdown.h).
    EXPECT_NE(trained.output.find("time: "), std::string::npos) << trained.output;
    EXPECT_NE(trained.output.find(" s wall: start-up "), std::string::npos) << trained.output;
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static fs::path run() { return dir_->path() / "run"; }
  static inline test::TempDir* dir_ = nullptr;
  static inline fs::path corpus_;
};

TEST_F(Features, TrainsMeasuresAndShowsAnSae) {
  const auto trained = run_tinylm({"features", run().string(), "--hook", "blocks.1.attn.hook_z",
                                   "--width", "64", "--k", "4", "--tokens", "16384", "--batch", "1024",
                                   "--eval-windows", "8"});
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  EXPECT_NE(trained.output.find("CE loss recovered"), std::string::npos) << trained.output;
  const fs::path sae = run() / "saes" / "blocks.1.attn.hook_z-w64-k4";
  for (const char* file : {"cfg.json", "sae_weights.safetensors", "metrics.json", "training.safetensors"})
    EXPECT_TRUE(fs::exists(sae / file)) << file;
  const auto metrics = nlohmann::json::parse(test::read_text(sae / "metrics.json"));
  EXPECT_EQ(metrics["tokens_trained"], 16384);
  EXPECT_LE(metrics["l0"].get<double>(), 4.0);
  EXPECT_GT(metrics["explained_variance"].get<double>(), 0.0);
  EXPECT_GE(metrics["dead_fraction"].get<double>(), 0.0);
  EXPECT_TRUE(metrics["ce_loss_recovered"].is_number()) << metrics.dump();
  // Again without --resume: refused, naming the way on.
  const auto again = run_tinylm({"features", run().string(), "--hook", "blocks.1.attn.hook_z",
                                 "--width", "64", "--k", "4"});
  EXPECT_EQ(again.exit_code, 2) << again.output;
  EXPECT_NE(again.output.find("--resume"), std::string::npos) << again.output;
  // --resume with more tokens continues from 16384.
  const auto resumed = run_tinylm({"features", run().string(), "--hook", "blocks.1.attn.hook_z",
                                   "--width", "64", "--k", "4", "--tokens", "20480", "--resume",
                                   "--eval-windows", "8"});
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("16384 of"), std::string::npos) << resumed.output;
  EXPECT_EQ(nlohmann::json::parse(test::read_text(sae / "metrics.json"))["tokens_trained"], 20480);
  // The inspection by name under RUN/saes/.
  const auto shown = run_tinylm({"inspect", run().string(), "--features", "blocks.1.attn.hook_z-w64-k4",
                                 "--tokens", "2000", "--json", "-"}, false);
  ASSERT_EQ(shown.exit_code, 0) << shown.output;
  const auto doc = nlohmann::json::parse(shown.output);
  const auto& f = doc["features"];
  EXPECT_EQ(f["hook"], "blocks.1.attn.hook_z");
  EXPECT_EQ(f["width"], 64);
  EXPECT_EQ(f["features"].size() + f["silent"].size(), 64u);
  ASSERT_FALSE(f["features"].empty());
  const auto& first = f["features"][0];
  EXPECT_EQ(first["head_shares"].size(), 2u);
  EXPECT_EQ(first["promoted"].size(), 5u);
  EXPECT_FALSE(first["top"].empty());
  for (size_t i = 1; i < f["features"].size(); ++i)  // most frequent first
    EXPECT_GE(f["features"][i - 1]["firings"].get<int64_t>(), f["features"][i]["firings"].get<int64_t>());
}

// Ctrl-C: the step under way ends, the state is saved, the exit status is 130; --resume
// (with --out and no --width or --k: the SAE's own) continues from the tokens done.
TEST_F(Features, InterruptSavesAndResumeContinues) {
  test::TempDir dir;
  const std::string out = (dir / "sae").string();
  const test::InterruptedRun stopped = test::interrupt_tinylm(
      {"features", run().string(), "--hook", "blocks.0.hook_resid_post", "--width", "48", "--k",
       "3", "--tokens", "1000000000", "--batch", "256", "--out", out},
      "SAE step 1:");
  const std::string& seen = stopped.result.output;
  ASSERT_TRUE(stopped.cue_seen) << seen;
  ASSERT_TRUE(stopped.exited) << seen;
  EXPECT_EQ(stopped.result.exit_code, 130) << seen;
  EXPECT_NE(seen.find("add --resume to continue"), std::string::npos) << seen;
  const auto partial = nlohmann::json::parse(test::read_text(dir / "sae" / "metrics.json"));
  EXPECT_EQ(partial["finished"], false);
  const int64_t done = partial["tokens_trained"].get<int64_t>();
  EXPECT_GE(done, 256);
  EXPECT_LT(done, 1000000000);
  const auto resumed = run_tinylm({"features", run().string(), "--hook", "blocks.0.hook_resid_post",
                                   "--out", out, "--resume", "--tokens", std::to_string(done + 512),
                                   "--eval-windows", "4"});
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("resuming " + out + ": " + std::to_string(done) + " of"), std::string::npos)
      << resumed.output;
  const auto metrics = nlohmann::json::parse(test::read_text(dir / "sae" / "metrics.json"));
  EXPECT_EQ(metrics["tokens_trained"], done + 512);
  EXPECT_EQ(metrics["d_sae"], 48);
  EXPECT_EQ(metrics["k"], 3);
}

TEST_F(Features, BadInputIsRefusedAndNothingIsWritten) {
  const auto refused = [&](const test::Args& extra, int code, const std::string& says) {
    test::Args args = {"features", run().string()};
    args.insert(args.end(), extra.begin(), extra.end());
    const auto result = run_tinylm(args);
    EXPECT_EQ(result.exit_code, code) << result.output;
    EXPECT_NE(result.output.find(says), std::string::npos) << result.output;
  };
  refused({"--hook", "blocks.1.attn.hook_zz"}, 1, "did you mean \"blocks.1.attn.hook_z\"");
  refused({"--hook", "blocks.1.attn.hook_z", "--width", "0"}, 2, "--width");
  refused({"--hook", "blocks.1.attn.hook_z", "--width", "8", "--k", "9"}, 2,
          "--k 9 is more than the SAE's width 8");
  refused({"--hook", "blocks.0.attn.hook_pattern"}, 1, "not one");
  refused({"--hook", "blocks.0.hook_resid_post", "--resume"}, 2, "holds no SAE");
  // A run whose corpus is gone: the error names the file.
  test::TempDir other;
  test::write_text(other / "corpus.txt", test::read_text(corpus_).substr(0, 20000));
  const auto config = test::write_tiny_config(other.path(), other / "corpus.txt", 2);
  ASSERT_EQ(run_tinylm({"train", config.string(), "--out", (other / "run").string()}).exit_code, 0);
  fs::remove(other / "corpus.txt");
  fs::remove_all(test::cache_dir() / other.path().filename());
  const auto gone = run_tinylm({"features", (other / "run").string(), "--hook", "blocks.0.hook_resid_post"});
  EXPECT_EQ(gone.exit_code, 1) << gone.output;
  EXPECT_NE(gone.output.find("corpus.txt"), std::string::npos) << gone.output;
  EXPECT_FALSE(fs::exists(other / "run" / "saes"));
  // None of the refusals above wrote anything but the one SAE the other test trains.
  if (fs::exists(run() / "saes")) {
    for (const auto& entry : fs::directory_iterator(run() / "saes"))
      EXPECT_EQ(entry.path().filename(), "blocks.1.attn.hook_z-w64-k4");
  }
}

}  // namespace
}  // namespace tinylm
