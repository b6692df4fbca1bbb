// Data-parallel training through the real binary: 2 ranks (by --nproc, by torchrun, by hand
// with torchrun's environment) train the model 1 process trains; the faults each get their
// message, exit status and a checkpoint to resume from. Gloo on 127.0.0.1, on free ports.

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <chrono>
#include <csignal>
#include <thread>

#include <nlohmann/json.hpp>

#include "test_util.h"
#include "train/run/safetensors.h"

namespace tinylm {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::TempDir;
using Clock = std::chrono::steady_clock;

// A TCP socket bound to port 0 of `address` (the kernel picks the port); returns the fd.
int bound_socket(uint32_t address, int& port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(address);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return -1;
  socklen_t length = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &length);
  port = ntohs(addr.sin_port);
  return fd;
}

// A port nobody listens on now, so tests can run in parallel.
int free_port() {
  int port = 0;
  ::close(bound_socket(INADDR_LOOPBACK, port));
  return port;
}

using Env = std::vector<std::pair<std::string, std::string>>;

// Starts `binary args...` with `env` added, stdout and stderr into `log`.
pid_t spawn(const std::vector<std::string>& args, const Env& env, const fs::path& log,
            const fs::path& binary = test::binary()) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (!std::freopen(log.c_str(), "w", stdout)) ::_exit(126);
    ::dup2(STDOUT_FILENO, STDERR_FILENO);
    for (const auto& [key, value] : env) ::setenv(key.c_str(), value.c_str(), 1);
    std::vector<char*> argv{const_cast<char*>(binary.c_str())};
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(binary.c_str(), argv.data());
    ::_exit(127);
  }
  return pid;
}

struct Exit {
  int code = -1;  // -1: still running at the deadline (then killed)
  double seconds = 0.0;
};

Exit wait_for(pid_t pid, double timeout_s) {
  const auto start = Clock::now();
  while (std::chrono::duration<double>(Clock::now() - start).count() < timeout_s) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status),
              std::chrono::duration<double>(Clock::now() - start).count()};
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  return {};
}

// The processes whose parent is `parent`, in the order they started (pid order).
std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> children;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string stat = test::read_text(entry.path() / "stat");
    const size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    int ppid = 0;
    char state = 0;
    if (std::sscanf(stat.c_str() + close + 1, " %c %d", &state, &ppid) == 2 && ppid == parent) {
      children.push_back(std::stoi(name));
    }
  }
  std::sort(children.begin(), children.end());
  return children;
}

bool alive(pid_t pid) {
  const std::string stat = test::read_text("/proc/" + std::to_string(pid) + "/stat");
  if (stat.empty()) return false;
  return stat.find(") Z") == std::string::npos;  // a zombie has stopped
}

// Until `path` exists, `pid` has stopped or 60 s have passed.
void wait_until_exists(const fs::path& path, pid_t pid) {
  const auto start = Clock::now();
  while (!fs::exists(path) && alive(pid) &&
         std::chrono::duration<double>(Clock::now() - start).count() < 60) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// A model small enough for 120 steps in about a second. Training amplifies rounding: with
// the sum of the batch split in two, losses here first differ by ~1e-7 and, at lr 3e-3, by
// 1e-3 a hundred steps later. At lr 5e-4 they stay within ~1e-6 and the weights within
// ~3e-7 (measured), so a tolerance of 1e-5 tests the equivalence, not the chaos. No biases:
// the key bias gets nothing but rounding noise as its gradient (softmax ignores a constant
// added to a row of scores), which AdamW's m / sqrt(v) turns into full-size steps, so it
// drifts apart (2e-6 to 1e-4) between any two orders of summation.
fs::path write_config(const fs::path& dir, int max_iters, const std::string& train_extra = "",
                      const std::string& data_extra = "", int batch_size = 8) {
  const fs::path path = dir / "dp.toml";
  test::write_text(path,
                   "[model]\nn_layer = 2\nn_head = 2\nn_embd = 32\nblock_size = 32\nbias = false\n"
                   "[data]\npath = \"" +
                       test::shakespeare().string() + "\"\ncache_dir = \"" +
                       (test::cache_dir() / "dp").string() + "\"\n" + data_extra +
                       "[train]\nbatch_size = " + std::to_string(batch_size) +
                       "\nmax_iters = " + std::to_string(max_iters) +
                       "\nlearning_rate = 5e-4\nwarmup_iters = 5\nlr_decay_iters = 120\n"
                       "eval_interval = 40\neval_iters = 4\nlog_interval = 1\n"
                       // float32: ranks equal one process to float32's tolerance; bfloat16
                       // (auto's choice on some CPUs) rounds each half-batch on its own.
                       "dtype = \"float32\"\n" +
                       train_extra);
  return path;
}

std::vector<json> read_metrics(const fs::path& run) {
  std::vector<json> records;
  std::istringstream lines(test::read_text(run / "metrics.jsonl"));
  for (std::string line; std::getline(lines, line);) records.push_back(json::parse(line));
  return records;
}

// Every logged loss of `b` within `tolerance` of `a`'s, step for step; returns how many.
int64_t expect_same_losses(const fs::path& a, const fs::path& b, double tolerance) {
  const auto ra = read_metrics(a), rb = read_metrics(b);
  EXPECT_EQ(ra.size(), rb.size());
  int64_t compared = 0;
  for (size_t i = 0; i < std::min(ra.size(), rb.size()); ++i) {
    EXPECT_EQ(ra[i]["kind"], rb[i]["kind"]);
    EXPECT_EQ(ra[i]["step"], rb[i]["step"]);
    for (const char* key : {"loss", "train_loss", "val_loss"}) {
      if (!ra[i].contains(key)) continue;
      EXPECT_NEAR(ra[i][key].get<double>(), rb[i][key].get<double>(), tolerance)
          << key << " at step " << ra[i]["step"];
      ++compared;
    }
  }
  return compared;
}

double max_weight_difference(const fs::path& a, const fs::path& b) {
  const Safetensors wa = load_safetensors(a / "model.safetensors");
  const Safetensors wb = load_safetensors(b / "model.safetensors");
  EXPECT_EQ(wa.tensors.size(), wb.tensors.size());
  double worst = 0.0;
  for (const auto& [name, tensor] : wa.tensors) {
    worst = std::max(worst, test::max_abs_diff(tensor, wb.tensors.at(name)));
  }
  return worst;
}

// One unbroken 1-process run of 120 steps, shared: the reference every world size must meet.
class DataParallel : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir;
    const auto r = test::run_tinylm(
        {"train", write_config(dir_->path(), 120).string(), "--out", reference().string()});
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  static void TearDownTestSuite() { delete dir_; }
  static fs::path reference() { return dir_->path() / "one"; }
  static fs::path config() { return dir_->path() / "dp.toml"; }
  static TempDir* dir_;
};
TempDir* DataParallel::dir_ = nullptr;

TEST_F(DataParallel, TwoRanksTrainTheModelOneProcessTrains) {
  TempDir dir;
  const auto r = test::run_tinylm(
      {"train", config().string(), "--out", (dir / "two").string(), "--nproc", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // 120 train losses, 4 evals (train and val, split across the ranks). Gradient norms are
  // not compared: a few of them amplify the rounding of the split sum beyond 1e-5.
  EXPECT_GE(expect_same_losses(reference(), dir / "two", 1e-5), 128);
  // Float tolerance, not bits: the two halves of the batch are summed in another order.
  EXPECT_LT(max_weight_difference(reference(), dir / "two"), 1e-5);
  // Rank 0 alone logs; rank 1 says nothing when all is well.
  EXPECT_NE(r.output.find("starting 2 ranks"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("rank 1 "), std::string::npos) << r.output;
  size_t done = 0;
  for (size_t at = r.output.find("done: "); at != std::string::npos;
       at = r.output.find("done: ", at + 1))
    ++done;
  EXPECT_EQ(done, 1u) << r.output;
  EXPECT_EQ(json::parse(test::read_text(dir / "two/state.json"))["world_size"], 2);
}

// What is left between 2 ranks and 1 process is the order of one sum: 2 ranks of batch 8
// compute exactly what 1 process computes in 2 micro-batches of 4 (autograd adds the second
// micro-batch's gradient to the first's, the all-reduce adds rank 1's to rank 0's), so
// every weight is the same to the bit.
TEST_F(DataParallel, TwoRanksEqualOneProcessWithTheSameMicroBatchesBitForBit) {
  // In float32 (the config's), in bfloat16 forced (so every CPU runs that path, emulated
  // where it has no bfloat16 units) and in the default, auto. With the same micro-batches
  // each rank runs what the one process runs, so no precision can tell them apart.
  for (const std::string dtype : {"float32", "bfloat16", "auto"}) {
    TempDir dir;
    const std::string precision = "--train.dtype=" + dtype;
    const auto one = test::run_tinylm({"train", config().string(), "--out", (dir / "one").string(),
                                       "--train.batch_size=4",
                                       "--train.gradient_accumulation_steps=2", precision});
    ASSERT_EQ(one.exit_code, 0) << one.output;
    const auto two = test::run_tinylm(
        {"train", config().string(), "--out", (dir / "two").string(), "--nproc", "2", precision});
    ASSERT_EQ(two.exit_code, 0) << two.output;
    const json state = json::parse(test::read_text(dir / "one/state.json"));
    if (dtype != "auto") {
      EXPECT_EQ(state["precision"]["dtype"], dtype);
    }
    EXPECT_EQ(state["precision"],
              json::parse(test::read_text(dir / "two/state.json"))["precision"]);
    EXPECT_EQ(test::read_text(dir / "one/model.safetensors"),
              test::read_text(dir / "two/model.safetensors"))
        << dtype;
    EXPECT_EQ(test::read_text(dir / "one/optimizer.safetensors"),
              test::read_text(dir / "two/optimizer.safetensors"))
        << dtype;
  }
}

TEST_F(DataParallel, EpochSamplingAndAccumulationSplitTheSameWay) {
  TempDir dir;
  const auto cfg = write_config(dir.path(), 100, "gradient_accumulation_steps = 2\n",
                                "sampling = \"epoch\"\n", /*batch_size=*/4);
  // batch_size 4 x 2 micro-steps: one process runs two micro-batches, each of 2 ranks one.
  ASSERT_EQ(test::run_tinylm({"train", cfg.string(), "--out", (dir / "one").string()}).exit_code,
            0);
  const auto r =
      test::run_tinylm({"train", cfg.string(), "--out", (dir / "two").string(), "--nproc", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_GE(expect_same_losses(dir / "one", dir / "two", 1e-5), 106);
  EXPECT_LT(max_weight_difference(dir / "one", dir / "two"), 1e-5);
  EXPECT_EQ(json::parse(test::read_text(dir / "one/state.json"))["data"],
            json::parse(test::read_text(dir / "two/state.json"))["data"]);
}

TEST_F(DataParallel, TorchrunStartsTheRanks) {
  TempDir dir;
  // Debian's torchrun (PyTorch 1.13 on Python 3.11) fails in its redirect parsing without
  // --redirects and --tee (its Std flag enum against Python 3.11's enum.Flag).
  const auto r = test::run_command("cd " + dir.path().string() +
                                   " && torchrun --redirects 1 --tee 1 --no_python --nnodes=1 "
                                   "--nproc_per_node=2 --master_addr=127.0.0.1 --master_port=" +
                                   std::to_string(free_port()) + " " + test::binary().string() +
                                   " train " + config().string() + " --out two --threads 1 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_GE(expect_same_losses(reference(), dir / "two", 1e-5), 128);
  EXPECT_LT(max_weight_difference(reference(), dir / "two"), 1e-5);
}

TEST_F(DataParallel, ResumeIsExactAtTheSameWorldSizeAndCloseAtAnother) {
  TempDir dir;
  const std::string cfg = config().string();
  const auto train = [&](const std::string& out, const test::Args& extra) {
    test::Args args = {"train", cfg, "--out", (dir / out).string()};
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = test::run_tinylm(args);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return r.output;
  };
  // 2 ranks unbroken, and 2 ranks stopped at step 80 then resumed: the same bits.
  train("two", {"--nproc", "2"});
  // (Stopped at an eval step, 80, so that no extra eval draws from the eval generator.)
  train("two_resumed", {"--nproc", "2", "--train.max_iters=80"});
  const std::string resumed =
      train("two_resumed", {"--nproc", "2", "--resume", "--train.max_iters=120"});
  EXPECT_EQ(resumed.find("float tolerance"), std::string::npos) << resumed;
  EXPECT_EQ(expect_same_losses(dir / "two", dir / "two_resumed", 0.0), 128);
  EXPECT_EQ(max_weight_difference(dir / "two", dir / "two_resumed"), 0.0);
  // 1 process to step 80, then 2 ranks: the same data order, float tolerance, said so.
  train("one_then_two", {"--train.max_iters=80"});
  const std::string across =
      train("one_then_two", {"--nproc", "2", "--resume", "--train.max_iters=120"});
  EXPECT_NE(
      across.find("the checkpoint was written by 1 rank and this run has 2: the data order is "
                  "the same, so results now match an unbroken run to float tolerance, not bit "
                  "for bit"),
      std::string::npos)
      << across;
  EXPECT_GE(expect_same_losses(reference(), dir / "one_then_two", 1e-5), 128);
}

// Dropout is seeded from (seed, step, rank) at every step, so resuming needs no generator
// state: with dropout on, a resumed run still draws the masks of an unbroken one.
TEST_F(DataParallel, ResumeWithDropoutIsExactAtOneAndTwoRanks) {
  TempDir dir;
  for (const test::Args& ranks : {test::Args{}, test::Args{"--nproc", "2"}}) {
    const std::string name = ranks.empty() ? "one" : "two";
    const auto train = [&](const std::string& out, const test::Args& extra) {
      test::Args args = {"train", config().string(), "--out", (dir / out).string(),
                         "--model.dropout=0.2"};
      args.insert(args.end(), ranks.begin(), ranks.end());
      args.insert(args.end(), extra.begin(), extra.end());
      const auto r = test::run_tinylm(args);
      EXPECT_EQ(r.exit_code, 0) << r.output;
    };
    train(name, {});
    train(name + "_resumed", {"--train.max_iters=80"});
    train(name + "_resumed", {"--resume", "--train.max_iters=120"});
    EXPECT_EQ(expect_same_losses(dir / name, dir / (name + "_resumed"), 0.0), 128) << name;
    EXPECT_EQ(max_weight_difference(dir / name, dir / (name + "_resumed")), 0.0) << name;
  }
  // Dropout is on: the run differs from the same run without it.
  EXPECT_GT(max_weight_difference(dir / "one", reference()), 1e-3);
}

TEST_F(DataParallel, AKilledRankStopsTheOthersNamingIt) {
  for (const int victim : {1, 0}) {
    TempDir dir;
    const auto cfg = write_config(dir.path(), 1000000, "dist_timeout_s = 20\n");
    const pid_t launcher = spawn({"train", cfg.string(), "--out", (dir / "run").string(), "--nproc",
                                  "2", "--threads", "1", "--train.eval_interval=20"},
                                 {}, dir / "log");
    wait_until_exists(dir / "run/state.json", launcher);  // past the first checkpoint
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const std::vector<pid_t> ranks = children_of(launcher);
    ASSERT_EQ(ranks.size(), 2u) << test::read_text(dir / "log");
    ::kill(ranks[static_cast<size_t>(victim)], SIGKILL);
    const Exit exit = wait_for(launcher, 30);
    const std::string log = test::read_text(dir / "log");
    EXPECT_EQ(exit.code, 1) << log;
    EXPECT_LT(exit.seconds, 20.0) << log;  // within dist_timeout_s
    EXPECT_NE(log.find("lost rank " + std::to_string(victim) + " of 2"), std::string::npos) << log;
    EXPECT_NE(log.find("rank " + std::to_string(victim) + " was killed by signal 9"),
              std::string::npos)
        << log;
    for (const pid_t rank : ranks) EXPECT_FALSE(alive(rank)) << "rank " << rank << " left running";
    // The last complete checkpoint resumes.
    const int64_t step =
        json::parse(test::read_text(dir / "run/state.json"))["step"].get<int64_t>();
    const auto r =
        test::run_tinylm({"train", cfg.string(), "--out", (dir / "run").string(), "--resume",
                          "--nproc", "2", "--train.max_iters=" + std::to_string(step + 3)});
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("resuming"), std::string::npos) << r.output;
  }
}

// A rank that hangs (SIGSTOP) rather than dies: the survivor's all-reduce times out after
// dist_timeout_s, it names the silent rank, and the launcher kills the hung one.
TEST_F(DataParallel, AHungRankIsNamedAfterTheTimeoutAndKilled) {
  TempDir dir;
  const auto cfg = write_config(dir.path(), 1000000);
  const pid_t launcher = spawn({"train", cfg.string(), "--out", (dir / "run").string(), "--nproc",
                                "2", "--threads", "1", "--train.dist_timeout_s=3"},
                               {}, dir / "log");
  wait_until_exists(dir / "run/state.json", launcher);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const std::vector<pid_t> ranks = children_of(launcher);
  ASSERT_EQ(ranks.size(), 2u) << test::read_text(dir / "log");
  ::kill(ranks[1], SIGSTOP);
  const Exit exit = wait_for(launcher, 60);
  const std::string log = test::read_text(dir / "log");
  EXPECT_EQ(exit.code, 1) << log;
  EXPECT_NE(log.find("rank 0: error: lost rank 1 of 2 during an all-reduce"), std::string::npos)
      << log;
  EXPECT_NE(log.find("Timed out"), std::string::npos) << log;
  EXPECT_NE(log.find("1 rank is still running 13 s after the first failure: killing it"),
            std::string::npos)
      << log;
  for (const pid_t rank : ranks) EXPECT_FALSE(alive(rank)) << "rank " << rank << " left running";
}

TEST_F(DataParallel, SignalsCheckpointOnceAndEveryRankExits130) {
  // SIGINT to the launcher, SIGTERM to rank 1, SIGINT to rank 0.
  for (const auto& [target, signal] : {std::pair{-1, SIGINT}, {1, SIGTERM}, {0, SIGINT}}) {
    TempDir dir;
    const auto cfg = write_config(dir.path(), 1000000);
    const pid_t launcher = spawn({"train", cfg.string(), "--out", (dir / "run").string(), "--nproc",
                                  "2", "--threads", "1", "--train.eval_interval=1000000"},
                                 {}, dir / "log");
    wait_until_exists(dir / "run/state.json", launcher);  // the eval at step 0 is written
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    const std::vector<pid_t> ranks = children_of(launcher);
    ASSERT_EQ(ranks.size(), 2u) << test::read_text(dir / "log");
    ::kill(target < 0 ? launcher : ranks[static_cast<size_t>(target)], signal);
    const Exit exit = wait_for(launcher, 30);
    const std::string log = test::read_text(dir / "log");
    EXPECT_EQ(exit.code, 130) << log;  // the launcher's status is 130 only when both ranks' are
    const auto state = json::parse(test::read_text(dir / "run/state.json"));
    EXPECT_GT(state["step"].get<int64_t>(), 0) << log;
    size_t written = 0;
    for (size_t at = log.find("interrupted: checkpoint"); at != std::string::npos;
         at = log.find("interrupted: checkpoint", at + 1)) {
      ++written;
    }
    EXPECT_EQ(written, 1u) << log;
  }
}

TEST_F(DataParallel, ABusyPortOrAnAbsentStoreIsAClearErrorWithinTheTimeout) {
  TempDir dir;
  // Something else listens on the port rank 0 is told to host the store on.
  int busy_port = 0;
  const int fd = bound_socket(INADDR_ANY, busy_port);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  const std::string busy = std::to_string(busy_port);
  const auto cfg = write_config(dir.path(), 10, "dist_timeout_s = 3\n");
  const std::vector<std::string> args{"train", cfg.string(), "--out", (dir / "run").string()};
  const pid_t rank0 =
      spawn(args, {{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", busy}}, dir / "log0");
  const Exit e0 = wait_for(rank0, 20);
  ::close(fd);
  const std::string log0 = test::read_text(dir / "log0");
  EXPECT_EQ(e0.code, 1) << log0;
  EXPECT_NE(log0.find("cannot host the store on port " + busy + ", which is already in use"),
            std::string::npos)
      << log0;

  // Rank 1 of a job whose store nobody hosts: gives up after dist_timeout_s.
  const std::string nobody = std::to_string(free_port());
  const pid_t rank1 = spawn(
      args,
      {{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", nobody}},
      dir / "log1");
  const Exit e1 = wait_for(rank1, 20);
  const std::string log1 = test::read_text(dir / "log1");
  EXPECT_EQ(e1.code, 1) << log1;
  EXPECT_LT(e1.seconds, 10.0) << log1;
  EXPECT_NE(log1.find("rank 1: error: found no store at MASTER_ADDR:MASTER_PORT = 127.0.0.1:" +
                      nobody + " within 3 s"),
            std::string::npos)
      << log1;
  EXPECT_FALSE(fs::exists(dir / "run"));
}

TEST_F(DataParallel, RanksWithDifferentConfigsOrBuildsAreRefused) {
  TempDir dir;
  const auto cfg = write_config(dir.path(), 10, "dist_timeout_s = 20\n");
  // The same binary under another name is the same build; one byte more is another.
  fs::copy_file(test::binary(), dir / "tinylm-same");
  fs::copy_file(test::binary(), dir / "tinylm-other");
  { std::ofstream(dir / "tinylm-other", std::ios::app) << '\n'; }
  fs::permissions(dir / "tinylm-other", fs::perms::owner_exec, fs::perm_options::add);
  struct Case {
    std::vector<std::string> rank1_extra;
    fs::path rank1_binary;
    std::string message;  // "" = they agree and train
  };
  const std::vector<Case> cases{
      {{"--train.learning_rate=1e-3"},
       test::binary(),
       "rank 1's config differs from rank 0's at train.learning_rate: 0.001 against 0.0005"},
      {{"--model.n_embd=64"}, test::binary(), "at model.n_embd: 64 against 32"},
      {{}, dir / "tinylm-other", "rank 1's config differs from rank 0's at tinylm build"},
      {{}, dir / "tinylm-same", ""},
  };
  for (const Case& c : cases) {
    const std::string port = std::to_string(free_port());
    const auto run = [&](int rank, const std::vector<std::string>& extra, const fs::path& binary) {
      std::vector<std::string> args{
          "train", cfg.string(), "--out", (dir / ("run" + port)).string(), "--threads", "1"};
      args.insert(args.end(), extra.begin(), extra.end());
      return spawn(args,
                   {{"RANK", std::to_string(rank)}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", port}},
                   dir / ("log" + std::to_string(rank)), binary);
    };
    const pid_t r0 = run(0, {}, test::binary()), r1 = run(1, c.rank1_extra, c.rank1_binary);
    const Exit e0 = wait_for(r0, 60), e1 = wait_for(r1, 60);
    const std::string log0 = test::read_text(dir / "log0"), log1 = test::read_text(dir / "log1");
    if (c.message.empty()) {
      EXPECT_EQ(e0.code, 0) << log0;
      EXPECT_EQ(e1.code, 0) << log1;
      continue;
    }
    EXPECT_EQ(e0.code, 1) << log0;
    EXPECT_EQ(e1.code, 1) << log1;
    EXPECT_NE(log0.find(c.message), std::string::npos) << log0;
    EXPECT_NE(log1.find(c.message), std::string::npos) << log1;
    EXPECT_FALSE(fs::exists(dir / ("run" + port) / "model.safetensors"));
  }
}

TEST_F(DataParallel, BadWorldsAndDevicesAreClearErrors) {
  TempDir dir;
  const test::Args train = {"train", config().string(), "--out", (dir / "run").string()};
  const auto with = [&](const test::Args& more) {
    test::Args args = train;
    args.insert(args.end(), more.begin(), more.end());
    return args;
  };
  struct Case {
    test::Env env;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {{{"RANK", "x"}, {"WORLD_SIZE", "2"}},
            "environment variable RANK=\"x\" is not an integer in [0, 1]"},
           {{{"RANK", "2"}, {"WORLD_SIZE", "2"}},
            "environment variable RANK=\"2\" is not an integer in [0, 1]"},
           {{{"RANK", "0"}, {"WORLD_SIZE", "0"}},
            "environment variable WORLD_SIZE=\"0\" is not an integer"},
           {{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "70000"}},
            "environment variable MASTER_PORT=\"70000\""},
           {{{"RANK", "0"}}, "RANK and WORLD_SIZE must be set together"},
           {{{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"MASTER_PORT", std::to_string(free_port())}},
            ""},  // a world of one
       }) {
    const auto r = test::run_tinylm(train, true, c.env);
    const std::string env = c.env.front().first + "=" + c.env.front().second + "...";
    if (c.message.empty()) {
      EXPECT_EQ(r.exit_code, 0) << env << "\n" << r.output;
      fs::remove_all(dir / "run");
      continue;
    }
    EXPECT_EQ(r.exit_code, 2) << env << "\n" << r.output;
    EXPECT_NE(r.output.find(c.message), std::string::npos) << env << "\n" << r.output;
  }
  // A global batch of 8 sequences cannot be split over 3 ranks: every rank says so.
  const auto three = test::run_tinylm(with({"--nproc", "3"}));
  EXPECT_EQ(three.exit_code, 1) << three.output;
  EXPECT_NE(three.output.find("train.batch_size x train.gradient_accumulation_steps = 8 sequences, "
                              "does not split evenly over 3 ranks"),
            std::string::npos)
      << three.output;
  // --device: malformed is a usage error; CUDA from a CPU-only LibTorch says so.
  const auto gpu = test::run_tinylm(with({"--device", "gpu"}));
  EXPECT_EQ(gpu.exit_code, 2) << gpu.output;
  EXPECT_NE(gpu.output.find("--device must be cpu, cuda or cuda:N (got \"gpu\")"),
            std::string::npos);
  if (!torch::cuda::is_available()) {
    const auto cuda = test::run_tinylm(with({"--device", "cuda"}));
    EXPECT_EQ(cuda.exit_code, 1) << cuda.output;
    EXPECT_NE(cuda.output.find("device cuda: this tinylm is built against LibTorch " TORCH_VERSION
                               " without CUDA; build it against a CUDA one"),
              std::string::npos)
        << cuda.output;
  }
}

}  // namespace
}  // namespace tinylm
