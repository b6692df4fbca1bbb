// What a careless user types, case by case: each bad command must exit with its status (2 for
// a bad command line, 1 for bad input), name what was wrong in words, and leave the file
// system as it found it: no run, cache, lock or output directory made, nothing changed.

#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "data/utf8.h"
#include "test_util.h"

namespace tinylm {
namespace {

namespace fs = std::filesystem;
using test::TempDir;

// Every path under `roots` with its size and modification time: what a command may not change.
std::map<std::string, std::string> tree(const std::vector<fs::path>& roots) {
  std::map<std::string, std::string> out;
  for (const fs::path& root : roots) {
    if (!fs::exists(root)) continue;
    for (const auto& entry : fs::recursive_directory_iterator(root)) {
      const auto time = entry.last_write_time().time_since_epoch().count();
      out[entry.path().string()] =
          (entry.is_regular_file() ? std::to_string(entry.file_size()) : "dir") + " @" +
          std::to_string(time);
    }
  }
  return out;
}

// `tinylm ARGS` through the shell (stdout and stderr together), with --threads 1 unless the
// case sets its own.
test::CommandResult tinylm(const std::vector<std::string>& args) {
  std::string command = "'" + test::binary().string() + "'";
  bool threads = false;
  for (const std::string& arg : args) {
    std::string quoted;
    for (const char c : arg) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
    command += " '" + quoted + "'";
    threads = threads || arg == "--threads";
  }
  if (!threads) command += " --threads 1";
  return test::run_command(command + " 2>&1 < /dev/null");
}

class Careless : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir;
    config_ = test::write_tiny_config(dir_->path(), test::shakespeare(), 4);
    ASSERT_EQ(tinylm({"train", config_.string(), "--out", run().string()}).exit_code, 0);
    // A vocabulary of one token, for the analyses that need others.
    test::write_text(dir_->path() / "a.txt", std::string(400, 'a'));
    const auto r = tinylm({"train", config_.string(), "--out", (dir_->path() / "one").string(),
                           "--data.path=" + (dir_->path() / "a.txt").string()});
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  static void TearDownTestSuite() { delete dir_; }
  static fs::path run() { return dir_->path() / "run"; }

  // Runs `args`; expects `code`, each of `said` in the output, none of `unsaid`, and no change
  // under the test's directories.
  void expect(const std::vector<std::string>& args, int code, const std::vector<std::string>& said,
              const std::vector<std::string>& unsaid = {}) {
    const std::vector<fs::path> roots = {dir_->path(), scratch_.path(),
                                         test::cache_dir() / dir_->path().filename()};
    const auto before = tree(roots);
    const test::CommandResult r = tinylm(args);
    std::string line;
    for (const std::string& a : args) line += " " + a;
    EXPECT_EQ(r.exit_code, code) << line << "\n" << r.output;
    for (const std::string& s : said)
      EXPECT_NE(r.output.find(s), std::string::npos) << line << ": missing \"" << s << "\" in\n"
                                                     << r.output;
    for (const std::string& s : unsaid)
      EXPECT_EQ(r.output.find(s), std::string::npos) << line << ": \"" << s << "\" in\n"
                                                     << r.output;
    for (const char* internal : {"terminate called", "INTERNAL ASSERT", "filesystem error",
                                 "probability tensor", "out of range"}) {
      EXPECT_EQ(r.output.find(internal), std::string::npos) << line << "\n" << r.output;
    }
    const auto after = tree(roots);
    for (const auto& [path, state] : after) {
      const auto it = before.find(path);
      EXPECT_TRUE(it != before.end() && it->second == state)
          << line << ": " << path << (it == before.end() ? " was made" : " was changed");
    }
    for (const auto& [path, state] : before)
      EXPECT_TRUE(after.count(path)) << line << ": " << path << " was removed";
  }

  static TempDir* dir_;
  static fs::path config_;
  TempDir scratch_;  // where a case's outputs would go
};
TempDir* Careless::dir_ = nullptr;
fs::path Careless::config_;

TEST_F(Careless, NonFiniteAndOutOfRangeNumbersAreRefusedBeforeAnythingIsWritten) {
  const std::string out = (scratch_ / "new").string();
  const std::string config = config_.string();
  expect({"train", config, "--out", out, "--model.dropout=nan"}, 2,
         {"model.dropout must be a finite number, and in [0, 1) (got nan)"});
  expect({"train", config, "--out", out, "--train.weight_decay=inf"}, 2,
         {"train.weight_decay must be a finite number"});
  expect({"train", config, "--out", out, "--train.learning_rate=-inf"}, 2,
         {"train.learning_rate must be a finite number"});
  expect({"train", config, "--out", out, "--sample.temperature=nan"}, 2,
         {"sample.temperature must be a finite number"});
  expect({"train", config, "--out", out, "--seed", "-5"}, 2,
         {"--seed: must be a whole number >= 0 (got \"-5\")"});
  expect({"train", config, "--out", out, "--seed", "99999999999999999999"}, 2,
         {"--seed: must be a whole number >= 0"});
  expect({"train", config, "--out", out, "--train.seed=99999999999999999999"}, 2, {"train.seed"});
  expect({"sample", run().string(), "--temperature", "nan"}, 2,
         {"--temperature: must be a finite number (got \"nan\")"});
  expect({"sample", run().string(), "--top-p", "nan"}, 2, {"--top-p: must be a finite number"});
  expect({"sample", run().string(), "--top-p", "0"}, 2, {"--top-p must be in (0, 1] (got 0"});
  // Text must be UTF-8: config.toml and config.json are written as it.
  expect({"train", config, "--out", out, "--sample.prompt=\xff"}, 2,
         {"sample.prompt must be UTF-8 text (byte 0 is not)"});
  expect({"sample", run().string(), "--prompt", "ok \xC3"}, 2,
         {"--prompt must be UTF-8 text (byte 3 is not)"});
  // Ranges in words, never a 300-digit bound.
  expect({"eval", run().string(), "--context", "0"}, 2,
         {"--context: must be a whole number >= 1 (got \"0\")"}, {"179769"});
  expect({"bench", config, "--repeats", "0"}, 2,
         {"--repeats: must be a whole number in [1, 1000] (got \"0\")"});
  // In a file, the key is named with its file.
  const fs::path bad = scratch_ / "bad.toml";
  test::write_text(bad, test::read_text(config_) + "[sample]\ntop_p = nan\n");
  expect({"train", bad.string(), "--out", out}, 1,
         {"sample.top_p must be a finite number", bad.string()});
  fs::remove(bad);
}

TEST_F(Careless, AResumeCannotChangeWhatTheTokensMean) {
  for (const std::string key :
       {"--data.tokenizer=byte", "--data.vocab_size=300", "--data.model_type=unigram"}) {
    expect({"train", config_.string(), "--out", run().string(), "--resume", key}, 2,
           {"would change the tokenizer of the run being resumed"});
  }
  expect({"train", config_.string(), "--out", run().string(), "--resume", "--model.n_layer=3"}, 2,
         {"would change the model of the run being resumed"});
}

TEST_F(Careless, AFailedTrainLeavesNothingBehind) {
  const std::string config = config_.string();
  const fs::path out = scratch_ / "runs" / "x";
  test::write_text(scratch_ / "empty.txt", "");
  test::write_text(scratch_ / "one.txt", "a");
  test::write_text(scratch_ / "binary.txt", std::string("\x00\xff\xfe\x01", 4));
  expect(
      {"train", config, "--out", out.string(), "--data.path=" + (scratch_ / "empty.txt").string()},
      1, {"empty"});
  expect({"train", config, "--out", out.string(), "--data.path=" + (scratch_ / "one.txt").string()},
         1, {"the corpus gives no"});
  expect(
      {"train", config, "--out", out.string(), "--data.path=" + (scratch_ / "binary.txt").string()},
      1, {"binary.txt is not valid UTF-8"});
  expect({"train", config, "--out", (scratch_ / "nowhere").string(), "--resume"}, 1,
         {"cannot resume", "does not exist"});
  // A foreign directory is refused without a lock file written into it.
  test::write_text(scratch_ / "notes.txt", "mine\n");
  expect({"train", config, "--out", scratch_.path().string()}, 1,
         {"is not a tinylm run (it holds"});
  // A file where the directory should be, as itself or as a parent.
  expect({"train", config, "--out", (scratch_ / "notes.txt").string()}, 1,
         {"it is a file, not a directory"});
  expect({"train", config, "--out", (scratch_ / "notes.txt" / "run").string()}, 1,
         {"is a file, not a directory"});
  expect({"train", config, "--out", ""}, 1, {"--out is empty"});
}

TEST_F(Careless, OutputsGoOnlyWhereTheyCan) {
  const std::string r = run().string();
  expect({"export", r, "--format", "nanogpt", "--out", ""}, 2, {"--out is empty"});
  expect({"export", r, "--format", "nanogpt", "--out", (scratch_ / "no/such/ckpt.pt").string()}, 1,
         {"does not exist", "make it first"});
  expect({"inspect", r, "--heads", "--html", (scratch_ / "no/such/r.html").string()}, 1,
         {"does not exist"});
  expect({"inspect", r, "--heads", "--json", scratch_.path().string()}, 1, {"it is a directory"});
  expect({"eval", r, "--text", "/nonexistent/text.txt"}, 1,
         {"corpus not found: /nonexistent/text.txt (--text"}, {"[data] path"});
  // A refusal after the directory was made (a run that cannot be exported) removes it again.
  expect({"export", r, "--format", "llama2c", "--out", (scratch_ / "l2c/model.bin").string()}, 1,
         {"is not a model llama2.c's run.c can run"});
}

TEST_F(Careless, BenchNeverRemovesADirectoryItDidNotMake) {
  // `bench --checkpoint` removes what it wrote: pointed at runs/, it used to delete every run.
  expect({"bench", config_.string(), "--checkpoint", "--checkpoint-dir", dir_->path().string()}, 2,
         {"--checkpoint-dir: " + dir_->path().string() + " exists"});
  // Its own directory (two levels made) is gone after, and the run beside it is untouched.
  expect({"bench", config_.string(), "--checkpoint", "--repeats", "1", "--checkpoint-dir",
          (scratch_ / "made/bench").string()},
         0, {"checkpoint of"});
  expect({"bench", config_.string(), "--run", "--run-dir", dir_->path().string()}, 2,
         {"--run-dir: " + dir_->path().string() + " exists"});
}

TEST_F(Careless, AnalysesSayWhatTheyCannotDoInTheUsersWords) {
  expect({"inspect", (dir_->path() / "one").string(), "--analogy", "a:a::a"}, 1,
         {"--analogy a:a::a", "no other token can answer it"});
  expect({"inspect", run().string(), "--context-drift", "Z"}, 1,
         {"--context-drift \"Z\"", "at least 2 occurrences"});
}

// A directory of texts is read file by file: an error names the file, and the line and
// column in it, not in the files run together.
TEST_F(Careless, AnErrorInATextDirectoryNamesTheFileAndItsLine) {
  const fs::path texts = scratch_ / "texts";
  fs::create_directories(texts);
  test::write_text(texts / "a.txt", "First line.\nSecond line.\nThird.\n");
  test::write_text(texts / "b.txt", "Fine.\nNot \xE2\x82\xAC fine.\n");
  const std::string b = (texts / "b.txt").string();
  expect({"eval", run().string(), "--text", texts.string()}, 1,
         {"(line 2, column 5) of " + b + " is not in the tokenizer's vocabulary"});
  expect({"inspect", run().string(), "--heads", "--text", texts.string()}, 1,
         {"(line 2, column 5) of " + b});
}

TEST_F(Careless, ThreadsAreCappedAtTheCores) {
  const test::CommandResult r =
      tinylm({"sample", run().string(), "--threads", "100000", "--max-new-tokens", "2"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("--threads 100000 is more than the"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("TINYLM_OVERSUBSCRIBE=1"), std::string::npos) << r.output;
}

TEST_F(Careless, ATinyTopPKeepsTheLikeliestToken) {
  for (const char* p : {"1e-38", "1e-45"}) {
    expect({"sample", run().string(), "--top-p", p, "--max-new-tokens", "4"}, 0, {"tokens in"});
  }
}

TEST_F(Careless, AResumeWithAnotherConfigFileSaysItIsNotUsed) {
  const fs::path other = scratch_ / "other.toml";
  test::write_text(other, test::read_text(config_) + "[sample]\nmax_new_tokens = 7\n");
  const fs::path copy = scratch_ / "copy";
  fs::copy(run(), copy, fs::copy_options::recursive);
  const test::CommandResult r =
      tinylm({"train", other.string(), "--out", copy.string(), "--resume"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(other.string() + " is not used, and differs in 1 key "
                                           "(sample.max_new_tokens is 7 there, 500 in the run)"),
            std::string::npos)
      << r.output;
}

// A run that diverges stops at the step, names it and the checkpoint it keeps, exits 1, and
// that checkpoint loads: nothing non-finite was ever written.
TEST_F(Careless, ADivergingRunStopsAndKeepsItsLastFiniteCheckpoint) {
  const fs::path out = scratch_ / "diverged";
  const test::CommandResult r =
      tinylm({"train", config_.string(), "--out", out.string(), "--train.learning_rate=1e6",
              "--train.max_iters=40", "--train.eval_interval=2", "--train.lr_decay_iters=40"});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("became NaN at step"), std::string::npos) << r.output;
  const size_t at = r.output.find("(last finite checkpoint: step ");
  ASSERT_NE(at, std::string::npos) << r.output;
  const std::string step =
      r.output.substr(at + 30, r.output.find(')', at) - at - 30);  // "(last ... step " is 30
  EXPECT_EQ(r.output.find("INTERNAL ASSERT"), std::string::npos) << r.output;
  const test::CommandResult e = tinylm({"eval", out.string(), "--json"});
  ASSERT_EQ(e.exit_code, 0) << e.output;
  const auto state = nlohmann::json::parse(test::read_text(out / "state.json"));
  EXPECT_EQ(std::to_string(state["step"].get<int64_t>()), step);
}

// A byte model's samples are text: bytes that are not UTF-8 become U+FFFD unless --bytes.
TEST_F(Careless, SamplesOfAByteModelAreValidUtf8) {
  const fs::path out = scratch_ / "bytes";
  ASSERT_EQ(tinylm({"train", config_.string(), "--out", out.string(), "--data.tokenizer=byte",
                    "--train.max_iters=2"})
                .exit_code,
            0);
  // An untrained byte model draws from all 256 bytes: invalid UTF-8 nearly every other token.
  const std::string command = "'" + test::binary().string() + "' sample '" + out.string() +
                              "' --temperature 2 --top-k 0 --max-new-tokens 300 --threads 1";
  const test::CommandResult text = test::run_command(command + " 2>/dev/null");
  ASSERT_EQ(text.exit_code, 0);
  EXPECT_EQ(find_invalid_utf8(text.output), std::string::npos);
  EXPECT_NE(text.output.find("\xEF\xBF\xBD"), std::string::npos);
  const test::CommandResult raw = test::run_command(command + " --bytes 2>/dev/null");
  EXPECT_NE(find_invalid_utf8(raw.output), std::string::npos) << "--bytes writes them as they are";
}

}  // namespace
}  // namespace tinylm
