// A checkpoint's files change together, and one training holds a run directory at a time.

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "test_util.h"
#include "train/run/checkpoint_transaction.h"
#include "train/training_lock.h"

namespace tinylm {
namespace {

namespace fs = std::filesystem;
using test::TempDir;

// A checkpoint of two files, "a" and state.json, each holding `version`.
void save_version(const fs::path& dir, const std::string& version) {
  CheckpointTransaction transaction(dir);
  test::write_text(transaction.staging() / "a", version);
  test::write_text(transaction.staging() / "state.json", version);
  transaction.commit();
}

std::string version_of(const fs::path& dir) {
  const CheckpointReadLock lock(dir);
  const std::string a = test::read_text(dir / "a");
  EXPECT_EQ(a, test::read_text(dir / "state.json")) << "a mix of two checkpoints";
  return a;
}

TEST(CheckpointTransaction, CommitReplacesEveryFileAndLeavesNothingBehind) {
  TempDir dir;
  save_version(dir.path(), "1");
  save_version(dir.path(), "2");
  EXPECT_EQ(version_of(dir.path()), "2");
  std::set<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir.path())) {
    names.insert(entry.path().filename().string());
  }
  EXPECT_EQ(names, (std::set<std::string>{"a", "state.json", ".checkpoint.lock"}));
}

TEST(CheckpointTransaction, OneNeverCommittedLeavesTheOldCheckpoint) {
  TempDir dir;
  save_version(dir.path(), "1");
  {
    CheckpointTransaction transaction(dir.path());
    test::write_text(transaction.staging() / "a", "2");
  }  // an exception, a full disk: destroyed uncommitted
  EXPECT_EQ(version_of(dir.path()), "1");
  EXPECT_FALSE(fs::exists(dir / ".checkpoint-next"));
}

TEST(CheckpointTransaction, OneKilledBeforeItsCommitPointIsRolledBack) {
  TempDir dir;
  save_version(dir.path(), "1");
  fs::create_directory(dir / ".checkpoint-next");  // what a SIGKILL mid-write leaves
  test::write_text(dir / ".checkpoint-next/a", "2");
  EXPECT_EQ(version_of(dir.path()), "1");
  save_version(dir.path(), "3");  // the next save discards it
  EXPECT_EQ(version_of(dir.path()), "3");
}

TEST(CheckpointTransaction, OneKilledAfterItsCommitPointIsRolledForwardByTheNextReader) {
  TempDir dir;
  save_version(dir.path(), "1");
  // Killed mid-move: "a" already moved, state.json still in .checkpoint-commit/.
  fs::create_directory(dir / ".checkpoint-commit");
  test::write_text(dir / ".checkpoint-commit/state.json", "2");
  test::write_text(dir / "a", "2");
  EXPECT_EQ(version_of(dir.path()), "2");
  EXPECT_FALSE(fs::exists(dir / ".checkpoint-commit"));
}

TEST(CheckpointTransaction, AReaderWaitsForAnInstallInProgress) {
  TempDir dir;
  save_version(dir.path(), "1");
  // A writer holding the install lock: the reader must not read until it lets go.
  FileLock installing(dir / ".checkpoint.lock");
  installing.lock(FileLock::Mode::kExclusive);
  const pid_t child = ::fork();
  if (child == 0) {
    const CheckpointReadLock lock(dir.path());
    ::_exit(test::read_text(dir / "a") == "2" ? 0 : 1);
  }
  ::usleep(200 * 1000);
  test::write_text(dir / "a", "2");
  installing.unlock();
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the reader did not wait";
}

TEST(TrainingLock, ASecondHolderIsRefusedAndNamesTheFirst) {
  TempDir dir;
  const TrainingLock first(dir.path());
  const std::string error = test::error_of([&] { TrainingLock second(dir.path()); });
  EXPECT_NE(error.find("is being trained by pid " + std::to_string(::getpid()) + " on host "),
            std::string::npos)
      << error;
}

TEST(TrainingLock, ItIsFreeAgainOnceReleasedAndItsFileIsEmptied) {
  TempDir dir;
  { const TrainingLock first(dir.path()); }
  EXPECT_EQ(test::read_text(dir / "train.lock"), "");
  const TrainingLock again(dir.path());
  EXPECT_FALSE(again.taken_over_from().has_value());
  const auto holder = nlohmann::json::parse(test::read_text(dir / "train.lock"));
  EXPECT_EQ(holder["pid"], ::getpid());
}

TEST(TrainingLock, AStaleLockWhoseHolderIsGoneIsTakenOver) {
  TempDir dir;
  const pid_t gone = ::fork();
  if (gone == 0) ::_exit(0);
  ::waitpid(gone, nullptr, 0);
  test::write_text(dir / "train.lock",
                   nlohmann::json{{"pid", gone}, {"host", "elsewhere"}, {"since", "then"}}.dump());
  const TrainingLock lock(dir.path());
  ASSERT_TRUE(lock.taken_over_from().has_value());
  EXPECT_EQ(*lock.taken_over_from(),
            "pid " + std::to_string(gone) + " on host elsewhere (since then)");
}

TEST(TrainingLock, AHolderInAnotherProcessIsSeen) {
  TempDir dir;
  int ready[2], done[2];
  ASSERT_EQ(::pipe(ready), 0);
  ASSERT_EQ(::pipe(done), 0);
  const pid_t holder = ::fork();
  if (holder == 0) {
    const TrainingLock lock(dir.path());
    char c = 1;
    (void)::write(ready[1], &c, 1);
    (void)::read(done[0], &c, 1);
    ::_exit(0);
  }
  char c;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  const std::string error = test::error_of([&] { TrainingLock second(dir.path()); });
  EXPECT_NE(error.find("pid " + std::to_string(holder)), std::string::npos) << error;
  (void)::write(done[1], &c, 1);
  ::waitpid(holder, nullptr, 0);
  EXPECT_NO_THROW(TrainingLock(dir.path()));
}

}  // namespace
}  // namespace tinylm
