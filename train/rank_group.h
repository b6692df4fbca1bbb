#pragma once
// The ranks of one data-parallel job, on PyTorch's c10d: they meet through a TCPStore
// (torchrun's convention for finding it), talk through Gloo on CPU or NCCL on CUDA, and
// need only three things of each other: a sum all-reduce, an agreement at start-up, and, when
// a collective fails, the name of the rank that was lost (each rank keeps a heartbeat in the
// store, so the survivors can tell the dead from the merely slow).
// What it does not do: start processes (tools/rank_launcher.h), decide what is reduced
// (train/train_step.h), or move any bytes itself.

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <torch/torch.h>

namespace tinylm {

// torchrun's environment: RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR,
// MASTER_PORT; TORCHELASTIC_USE_AGENT_STORE=True when the launcher (torchrun, or
// `tinylm train --nproc`) hosts the store and rank 0 only joins it.
struct WorldEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  bool agent_store = false;
  int restart_count = 0;  // TORCHELASTIC_RESTART_COUNT: the store prefix of this attempt
};

// nullopt when neither RANK nor WORLD_SIZE is set. Throws std::invalid_argument naming the
// variable when one is malformed or out of range (RANK >= WORLD_SIZE, a port > 65535, ...).
std::optional<WorldEnv> world_from_environment();

// A rank stopped answering (killed, crashed, or its machine gone) while the others waited.
class RankLost : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class RankGroup {
 public:
  // Joins the group: rank 0 hosts the store unless env.agent_store; everyone waits for the
  // others at most `timeout`. Throws std::runtime_error saying what failed (the port taken,
  // nobody answering at MASTER_ADDR:MASTER_PORT, a rank that never came).
  RankGroup(const WorldEnv& env, const torch::Device& device, std::chrono::milliseconds timeout);
  ~RankGroup();
  RankGroup(const RankGroup&) = delete;
  RankGroup& operator=(const RankGroup&) = delete;

  int rank() const { return env_.rank; }
  int size() const { return env_.world_size; }

  // In place, every rank gets the same bits. Throws RankLost naming the lost rank(s).
  void all_reduce_sum(torch::Tensor& tensor);

  // Each rank states (key, value) facts in the same order; when every rank's facts equal
  // rank 0's this returns on every rank. Otherwise every rank throws the same std::runtime_error,
  // naming the first rank and key that differ (or the first rank's non-empty `local_error`,
  // so that a rank that cannot start stops the others with its reason).
  void agree(const std::string& topic,
             const std::vector<std::pair<std::string, std::string>>& facts,
             const std::string& local_error = "");

 private:
  [[noreturn]] void throw_lost(const std::string& during, const std::string& cause);
  std::vector<int64_t> read_heartbeats();

  WorldEnv env_;
  std::chrono::milliseconds timeout_;
  struct Collectives;  // the stores and the backend, kept out of this header
  std::unique_ptr<Collectives> collectives_;
  std::atomic<bool> stopping_{false};
  std::thread heartbeat_;
};

}  // namespace tinylm
