// Nothing lost: a training killed at any moment leaves one whole checkpoint that resumes;
// readers of a run in training see whole checkpoints; a full disk keeps the last one; one
// training per run directory.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <sstream>
#include <thread>

#include "data/io/files.h"
#include "test_util.h"
#include "train/run/checkpoint.h"
#include "train/trainer.h"
#include "train/training_lock.h"

namespace tinylm {
namespace {

namespace fs = std::filesystem;
using test::run_tinylm;
using test::TempDir;

// A model of 10k parameters that evaluates and checkpoints after every step (~20 ms each).
fs::path write_every_step_config(const fs::path& dir, int max_iters) {
  const fs::path path = dir / "every_step.toml";
  test::write_text(path,
                   "[model]\nn_layer = 2\nn_head = 2\nn_embd = 16\nblock_size = 16\n"
                   "[data]\npath = \"" +
                       test::shakespeare().string() + "\"\ncache_dir = \"" +
                       (dir / "cache").string() +
                       "\"\n[train]\nbatch_size = 4\nmax_iters = " + std::to_string(max_iters) +
                       "\nwarmup_iters = 1\nlr_decay_iters = " + std::to_string(max_iters) +
                       "\neval_interval = 1\neval_iters = 1\nlog_interval = 1\n");
  return path;
}

// `tinylm train CONFIG --out RUN [--resume] --threads 1` in the background, its stdout and
// stderr into `log`.
pid_t start_training(const fs::path& config, const fs::path& run, bool resume,
                     const fs::path& log) {
  std::vector<std::string> words = {"tinylm",    "train", config.string(), "--out", run.string(),
                                    "--threads", "1"};
  if (resume) words.push_back("--resume");
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  const std::string binary = test::binary().string();
  fs::remove(log);  // before the fork: the caller reads it from now on
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    ::execv(binary.c_str(), argv.data());
    ::_exit(127);
  }
  return pid;
}

int wait_for(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Whether the child has exited, leaving it to be waited for.
bool has_exited(pid_t pid) {
  siginfo_t info{};
  return ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
         info.si_pid == pid;
}

// What identifies a checkpoint: its weights' and moments' file checksums (state.json's).
using Identity = std::pair<std::string, std::string>;
Identity identity_of(const fs::path& run) {
  const auto state = nlohmann::json::parse(test::read_text(run / "state.json"));
  return {state["files"]["model.safetensors"], state["files"]["optimizer.safetensors"]};
}

// What a user is told to resume (see check_run_directory): a whole checkpoint, or one a kill
// left committed but not yet moved into place.
bool holds_a_checkpoint(const fs::path& run) {
  return fs::exists(run / "state.json") || fs::exists(run / ".checkpoint-commit");
}

// The last "step K:" line of a training's log: step K was trained, so checkpoint K was whole.
int64_t last_logged_step(const fs::path& log) {
  static const std::regex line(R"(\] info step (\d+): loss)");
  int64_t last = -1;
  const std::string text = test::read_text(log);
  for (auto it = std::sregex_iterator(text.begin(), text.end(), line); it != std::sregex_iterator();
       ++it) {
    last = std::stoll((*it)[1]);
  }
  return last;
}

TEST(Durability, KilledAtFiftyRandomMomentsEveryRunResumesFromACheckpointAroundTheKill) {
  TempDir dir;
  constexpr int kSteps = 120;
  const fs::path config = write_every_step_config(dir.path(), kSteps);
  // The reference: one unbroken training, its checkpoint after every step.
  std::map<int64_t, Identity> reference;
  {
    torch::set_num_threads(1);
    TrainOptions options;
    options.out_dir = dir / "reference";
    options.progress = false;
    // on_step(s + 1) runs after step s is trained: checkpoint s is the one on disk.
    options.on_step = [&](int64_t step) { reference[step - 1] = identity_of(options.out_dir); };
    ASSERT_EQ(train(load_run_config(config), options).outcome, TrainOutcome::kFinished);
    reference[kSteps] = identity_of(options.out_dir);
  }
  ASSERT_EQ(reference.size(), static_cast<size_t>(kSteps + 1));

  // A quarter of the kills at a random moment of the start (loading, resuming, the first
  // checkpoint), the rest at a random moment within 400 ms of training. Timed from what the
  // log says, not from the clock: a sanitizer build starts several times slower.
  std::mt19937 rng(2026);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  double startup_ms = 500.0;  // the longest start seen so far
  const auto kill_moment = [&](pid_t pid, const fs::path& log) {
    using Clock = std::chrono::steady_clock;
    const auto launched = Clock::now();
    if (uniform(rng) < 0.25) {
      std::this_thread::sleep_for(
          std::chrono::duration<double, std::milli>(uniform(rng) * startup_ms));
      return;
    }
    while (last_logged_step(log) < 0 && !has_exited(pid)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    startup_ms = std::max(
        startup_ms, std::chrono::duration<double, std::milli>(Clock::now() - launched).count());
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(uniform(rng) * 400.0));
  };
  const fs::path run = dir / "killed", log = dir / "train.log";
  int kills = 0, during_training = 0, chains = 1;
  int64_t previous = -1;
  while (kills < 50) {
    if (previous == kSteps) {  // finished: start a new chain
      fs::remove_all(run);
      previous = -1;
      ++chains;
    }
    const pid_t pid = start_training(config, run, holds_a_checkpoint(run), log);
    kill_moment(pid, log);
    const bool killed = ::kill(pid, SIGKILL) == 0;
    const int status = wait_for(pid);
    if (!killed || status != 128 + SIGKILL) {  // it finished first
      ASSERT_EQ(status, 0) << test::read_text(log);
      previous = kSteps;
      continue;
    }
    ++kills;
    if (!holds_a_checkpoint(run)) {  // killed before its first checkpoint committed
      EXPECT_EQ(previous, -1);
      continue;
    }
    // It loads, verified, and is exactly the unbroken run's checkpoint of its step: the last
    // one whole before the kill, or the one being written at the kill.
    int64_t step = -1;
    ASSERT_NO_THROW(step = verify_checkpoint(run)) << "kill " << kills;
    ASSERT_NO_THROW(load_run(run));
    const int64_t trained = last_logged_step(log);
    if (trained >= 0) {
      EXPECT_TRUE(step == trained || step == trained + 1)
          << "kill " << kills << ": checkpoint " << step << " after step " << trained;
      ++during_training;
    }
    EXPECT_GE(step, previous) << "kill " << kills << " lost checkpoints";
    EXPECT_EQ(identity_of(run), reference.at(step)) << "kill " << kills << " at step " << step;
    previous = step;
  }
  // The last chain, resumed to the end, ends where the unbroken run did, bit for bit.
  if (previous != kSteps) {
    const pid_t pid = start_training(config, run, holds_a_checkpoint(run), log);
    ASSERT_EQ(wait_for(pid), 0) << test::read_text(log);
  }
  EXPECT_EQ(identity_of(run), reference.at(kSteps));
  EXPECT_GE(during_training, 25) << "too few kills landed while it trained";
  std::printf("[kills] %d kills (%d while training) over %d chains: every run resumed\n", kills,
              during_training, chains);
}

// The two states a kill during the first checkpoint leaves, made by hand from a real run:
// before the commit point a new start is what is wanted; after it the run is there to resume.
TEST(Durability, AKillDuringTheFirstCheckpointLeavesANewStartOrAResume) {
  TempDir dir;
  const fs::path config = write_every_step_config(dir.path(), 2);
  const fs::path whole = dir / "whole";
  ASSERT_EQ(run_tinylm({"train", config.string(), "--out", whole.string()}).exit_code, 0);
  // What the start writes before its first checkpoint: step 0's records (the probe's
  // reading, the first eval); and the first line after it.
  std::string at_start, after_start;
  {
    std::istringstream lines(test::read_text(whole / "metrics.jsonl"));
    for (std::string line; std::getline(lines, line);) {
      if (nlohmann::json::parse(line)["step"] == 0) {
        at_start += line + "\n";
      } else if (after_start.empty()) {
        after_start = line + "\n";
      }
    }
  }
  ASSERT_FALSE(at_start.empty());
  ASSERT_FALSE(after_start.empty());
  const auto train = [&](const fs::path& run, bool resume) {
    std::vector<std::string> words = {"train", config.string(), "--out", run.string()};
    if (resume) words.push_back("--resume");
    return run_tinylm(words);
  };

  // Before the commit point: step 0's records, the locks, a staged checkpoint.
  const fs::path staged = dir / "staged";
  fs::create_directories(staged / ".checkpoint-next");
  fs::copy_file(whole / "model.safetensors", staged / ".checkpoint-next/model.safetensors");
  test::write_text(staged / "metrics.jsonl", at_start);
  test::write_text(staged / "train.lock", "");
  test::write_text(staged / ".checkpoint.lock", "");
  const auto again = train(staged, false);
  EXPECT_EQ(again.exit_code, 0) << again.output;
  EXPECT_EQ(verify_checkpoint(staged), 2);
  EXPECT_EQ(identity_of(staged), identity_of(whole));
  const auto lines = [](const fs::path& file) {
    const std::string text = test::read_text(file);
    return std::count(text.begin(), text.end(), '\n');
  };
  EXPECT_EQ(lines(staged / "metrics.jsonl"), lines(whole / "metrics.jsonl"));  // begun afresh
  // A log that goes past step 0 is not a failed start's, and is kept.
  const fs::path logged = dir / "logged";
  fs::create_directories(logged);
  test::write_text(logged / "metrics.jsonl", at_start + after_start);
  const auto refused = train(logged, false);
  EXPECT_EQ(refused.exit_code, 1) << refused.output;
  EXPECT_NE(refused.output.find("is not a tinylm run (it holds metrics.jsonl)"), std::string::npos)
      << refused.output;
  EXPECT_EQ(test::read_text(logged / "metrics.jsonl"), at_start + after_start);

  // After the commit point, before state.json moved: a run, which --resume finishes.
  const fs::path committed = dir / "committed";
  fs::create_directories(committed / ".checkpoint-commit");
  for (const auto& entry : fs::directory_iterator(whole)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_regular_file() && name != "metrics.jsonl" && name != "train.lock" &&
        name != ".checkpoint.lock") {
      fs::copy_file(entry.path(), committed / ".checkpoint-commit" / name);
    }
  }
  fs::copy_file(whole / "metrics.jsonl", committed / "metrics.jsonl");
  const auto fresh = train(committed, false);
  EXPECT_EQ(fresh.exit_code, 1) << fresh.output;
  EXPECT_NE(fresh.output.find("already holds a run; pass --resume"), std::string::npos)
      << fresh.output;
  EXPECT_TRUE(fs::exists(committed / ".checkpoint-commit"));  // refused before touching it
  const auto resumed = train(committed, true);
  EXPECT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_EQ(verify_checkpoint(committed), 2);
  EXPECT_EQ(identity_of(committed), identity_of(whole));
}

TEST(Durability, ReadersOfARunInTrainingAlwaysSeeOneWholeCheckpoint) {
  TempDir dir;
  const fs::path config = write_every_step_config(dir.path(), 150);
  const fs::path run = dir / "run", log = dir / "train.log";
  const pid_t pid = start_training(config, run, false, log);
  int reads = 0;
  std::set<int64_t> steps;
  int status = -1;
  while (true) {
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (fs::exists(run / "state.json")) {
      // Every file against one manifest, then the run as sample/eval load it.
      ASSERT_NO_THROW(steps.insert(verify_checkpoint(run))) << "read " << reads;
      ASSERT_NO_THROW(load_run(run)) << "read " << reads;
      ++reads;
    }
    if (done == pid) break;
  }
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << test::read_text(log);
  EXPECT_GE(reads, 20);
  EXPECT_GE(steps.size(), 10u) << "the reads did not overlap the saves";
  std::printf("[readers] %d whole reads of %zu checkpoints during training\n", reads, steps.size());
}

TEST(Durability, ADiskThatFillsDuringACheckpointLeavesThePreviousOneWhole) {
  TempDir dir;
  const fs::path config = write_every_step_config(dir.path(), 3);
  const fs::path run = dir / "run";
  ASSERT_EQ(run_tinylm({"train", config.string(), "--out", run.string()}).exit_code, 0);
  const Identity before = identity_of(run);
  // optimizer.safetensors is ~90 KB; a 60 KB file-size limit stops its next write.
  const auto r = test::run_command("ulimit -f 60; exec " + test::binary().string() + " train " +
                                   config.string() + " --out " + run.string() +
                                   " --resume --train.max_iters=6 --threads 1 2>&1");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("File too large"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("still holds a whole checkpoint"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("terminate called"), std::string::npos) << r.output;
  EXPECT_EQ(verify_checkpoint(run), 3);
  EXPECT_EQ(identity_of(run), before);
  EXPECT_FALSE(fs::exists(run / ".checkpoint-next"));
  const auto eval = run_tinylm({"eval", run.string()});
  EXPECT_EQ(eval.exit_code, 0) << eval.output;
  // With room again, it resumes from there.
  EXPECT_EQ(run_tinylm({"train", config.string(), "--out", run.string(), "--resume",
                        "--train.max_iters=6"})
                .exit_code,
            0);
  EXPECT_EQ(verify_checkpoint(run), 6);
}

TEST(Durability, ASecondTrainingOfOneRunIsRefusedNamingTheHolder) {
  TempDir dir;
  const fs::path config = write_every_step_config(dir.path(), 2);
  const fs::path run = dir / "run";
  ASSERT_EQ(run_tinylm({"train", config.string(), "--out", run.string()}).exit_code, 0);
  {
    const TrainingLock held(run);  // this process is "the other training"
    const auto r = run_tinylm(
        {"train", config.string(), "--out", run.string(), "--resume", "--train.max_iters=4"});
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_NE(r.output.find("is being trained by pid " + std::to_string(::getpid())),
              std::string::npos)
        << r.output;
    // Readers need no training lock.
    EXPECT_EQ(run_tinylm({"eval", run.string()}).exit_code, 0);
  }
  EXPECT_EQ(verify_checkpoint(run), 2);
}

TEST(Durability, AStaleLockIsTakenOverWithAWarning) {
  TempDir dir;
  const fs::path config = write_every_step_config(dir.path(), 2);
  const fs::path run = dir / "run";
  ASSERT_EQ(run_tinylm({"train", config.string(), "--out", run.string()}).exit_code, 0);
  const pid_t gone = ::fork();
  if (gone == 0) ::_exit(0);
  wait_for(gone);
  test::write_text(run / "train.lock",
                   nlohmann::json{{"pid", gone}, {"host", "h"}, {"since", "t"}}.dump());
  const auto r = run_tinylm(
      {"train", config.string(), "--out", run.string(), "--resume", "--train.max_iters=4"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("taking over the lock of pid " + std::to_string(gone) + " on host h"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(test::read_text(run / "train.lock"), "");  // released on the way out
}

}  // namespace
}  // namespace tinylm
