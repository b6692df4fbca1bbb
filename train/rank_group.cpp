#include "train/rank_group.h"

#include <torch/version.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef TINYLM_WITH_NCCL
#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string_view>

#include <fmt/format.h>

namespace tinylm {
namespace {

// The common base of Gloo and NCCL: ProcessGroup in LibTorch 1.x, Backend from 2.0 on.
#if TORCH_VERSION_MAJOR >= 2
using Backend = c10d::Backend;
#else
using Backend = c10d::ProcessGroup;
#endif

constexpr auto kBeatInterval = std::chrono::milliseconds(500);
// A rank whose heartbeat does not move for this long is taken for lost.
constexpr auto kBeatSilence = std::chrono::milliseconds(2500);

int parse_env_int(const char* name, int fallback, int lo, int hi) {
  const char* text = std::getenv(name);
  if (text == nullptr) return fallback;
  char* end = nullptr;
  errno = 0;
  const long value = std::strtol(text, &end, 10);
  if (*text == '\0' || *end != '\0' || errno != 0 || value < lo || value > hi) {
    throw std::invalid_argument(
        fmt::format("environment variable {}={:?} is not an integer in "
                    "[{}, {}]",
                    name, std::string_view(text), lo, hi));  // fmt quotes a string_view
                                                             // with {:?}, not a char*
  }
  return static_cast<int>(value);
}

std::vector<uint8_t> to_bytes(const std::string& text) { return {text.begin(), text.end()}; }
std::string from_bytes(const std::vector<uint8_t>& bytes) { return {bytes.begin(), bytes.end()}; }

bool is_loopback(const std::string& addr) {
  return addr == "localhost" || addr == "::1" || addr.rfind("127.", 0) == 0;
}

// The local address this machine reaches `host` from: the source address the kernel picks
// for a (never sent) UDP datagram to it. Empty when `host` does not resolve.
std::string local_address_towards(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0) return "";
  std::string address;
  const int fd = ::socket(found->ai_family, SOCK_DGRAM, 0);
  sockaddr_storage local{};
  socklen_t length = sizeof local;
  char text[INET6_ADDRSTRLEN] = {};
  if (fd >= 0 && ::connect(fd, found->ai_addr, found->ai_addrlen) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) == 0) {
    const void* raw =
        local.ss_family == AF_INET6
            ? static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr)
            : static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&local)->sin_addr);
    if (::inet_ntop(local.ss_family, raw, text, sizeof text)) address = text;
  }
  if (fd >= 0) ::close(fd);
  ::freeaddrinfo(found);
  return address;
}

std::shared_ptr<::gloo::transport::Device> gloo_device(const std::string& master_addr, int port) {
  // GLOO_SOCKET_IFNAME names the interface, as in PyTorch. Otherwise the address this
  // machine reaches MASTER_ADDR from, which the others can reach it at too: PyTorch's
  // default, the address the host name resolves to, is often 127.0.0.1 (Debian's
  // /etc/hosts), and then no other machine can connect.
  if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname && *ifname) {
    return c10d::ProcessGroupGloo::createDeviceForInterface(ifname);
  }
  if (is_loopback(master_addr)) return c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1");
  const std::string local = local_address_towards(master_addr, port);
  if (!local.empty()) return c10d::ProcessGroupGloo::createDeviceForHostname(local);
  return c10d::ProcessGroupGloo::createDefaultDevice();
}

c10::intrusive_ptr<c10d::TCPStore> connect_store(const WorldEnv& env, bool server,
                                                 std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions options;
  options.port = static_cast<std::uint16_t>(env.master_port);
  options.isServer = server;
  options.numWorkers = static_cast<std::size_t>(env.world_size);
  options.waitWorkers = false;
  options.timeout = timeout;
  try {
    return c10::make_intrusive<c10d::TCPStore>(env.master_addr, options);
  } catch (const std::exception& e) {
    const std::string what = e.what();
    const std::string where = fmt::format("{}:{}", env.master_addr, env.master_port);
    if (server) {
      throw std::runtime_error(
          fmt::format("cannot host the store on port {}{} (set MASTER_PORT to a free port): {}",
                      env.master_port,
                      what.find("in use") != std::string::npos ? ", which is already in use" : "",
                      what.substr(0, what.find('\n'))));
    }
    throw std::runtime_error(fmt::format(
        "found no store at MASTER_ADDR:MASTER_PORT = {} within {} s (is rank 0 or the launcher "
        "running there, and are MASTER_ADDR and MASTER_PORT right?)",
        where, std::chrono::duration_cast<std::chrono::seconds>(timeout).count()));
  }
}

}  // namespace

std::optional<WorldEnv> world_from_environment() {
  if (std::getenv("RANK") == nullptr && std::getenv("WORLD_SIZE") == nullptr) return std::nullopt;
  if (std::getenv("RANK") == nullptr || std::getenv("WORLD_SIZE") == nullptr) {
    throw std::invalid_argument("RANK and WORLD_SIZE must be set together (torchrun sets both)");
  }
  WorldEnv env;
  env.world_size = parse_env_int("WORLD_SIZE", 1, 1, 1 << 16);
  env.rank = parse_env_int("RANK", 0, 0, env.world_size - 1);
  env.local_world_size = parse_env_int("LOCAL_WORLD_SIZE", env.world_size, 1, env.world_size);
  env.local_rank =
      parse_env_int("LOCAL_RANK", env.rank % env.local_world_size, 0, env.local_world_size - 1);
  env.master_port = parse_env_int("MASTER_PORT", 29500, 1, 65535);
  env.restart_count = parse_env_int("TORCHELASTIC_RESTART_COUNT", 0, 0, 1 << 20);
  if (const char* addr = std::getenv("MASTER_ADDR"); addr != nullptr) {
    if (*addr == '\0') throw std::invalid_argument("environment variable MASTER_ADDR is empty");
    env.master_addr = addr;
  }
  const char* agent = std::getenv("TORCHELASTIC_USE_AGENT_STORE");
  env.agent_store = agent != nullptr && std::string(agent) == "True";
  return env;
}

struct RankGroup::Collectives {
  c10::intrusive_ptr<c10d::Store> store;       // ours, under ".../tinylm/"
  c10::intrusive_ptr<c10d::Store> beat_store;  // the heartbeat thread's own connection
  c10::intrusive_ptr<Backend> backend;
};

RankGroup::RankGroup(const WorldEnv& env, const torch::Device& device,
                     std::chrono::milliseconds timeout)
    : env_(env), timeout_(timeout), collectives_(std::make_unique<Collectives>()) {
  const bool host = !env.agent_store && env.rank == 0;
  // torchrun's agent store keeps each restart attempt's keys apart under this prefix.
  const std::string attempt =
      env.agent_store ? fmt::format("/worker/attempt_{}", env.restart_count) : "";
  const auto prefixed = [&](const c10::intrusive_ptr<c10d::TCPStore>& tcp) {
    return c10::make_intrusive<c10d::PrefixStore>(attempt + "/tinylm", tcp);
  };
  const auto tcp = connect_store(env, host, timeout);
  collectives_->store = prefixed(tcp);
  collectives_->beat_store = prefixed(connect_store(env, false, timeout));
  const auto pg_store = c10::make_intrusive<c10d::PrefixStore>(attempt + "/pg", tcp);
#ifndef TINYLM_WITH_NCCL
  if (device.is_cuda())
    throw std::runtime_error("this tinylm was built without NCCL, which CUDA ranks need");
#endif
  try {
    if (device.is_cuda()) {
#ifdef TINYLM_WITH_NCCL
      if (device.has_index())
        c10::cuda::set_device(device.index());  // NCCL's communicator binds to it
      auto options = c10d::ProcessGroupNCCL::Options::create();
      options->timeout = timeout;
      collectives_->backend =
          c10::make_intrusive<c10d::ProcessGroupNCCL>(pg_store, env.rank, env.world_size, options);
#endif
    } else {
      auto options = c10d::ProcessGroupGloo::Options::create(timeout);
      options->devices.push_back(gloo_device(env.master_addr, env.master_port));
      collectives_->backend =
          c10::make_intrusive<c10d::ProcessGroupGloo>(pg_store, env.rank, env.world_size, options);
    }
  } catch (const std::exception& e) {
    const std::string what = e.what();
    throw std::runtime_error(
        fmt::format("not all {} ranks joined within {} s ({})", env.world_size,
                    std::chrono::duration_cast<std::chrono::seconds>(timeout).count(),
                    what.substr(0, what.find('\n'))));
  }
  heartbeat_ = std::thread([this] {
    const std::string key = fmt::format("beat/{}", env_.rank);
    while (!stopping_.load()) {
      try {
        collectives_->beat_store->add(key, 1);
      } catch (const std::exception&) {
        return;  // the store is gone; whoever waits on us learns it from their collective
      }
      for (auto slept = std::chrono::milliseconds(0); slept < kBeatInterval && !stopping_.load();
           slept += std::chrono::milliseconds(50)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
  });
}

RankGroup::~RankGroup() {
  stopping_.store(true);
  if (heartbeat_.joinable()) heartbeat_.join();
}

void RankGroup::all_reduce_sum(torch::Tensor& tensor) {
  std::vector<at::Tensor> tensors{tensor};
  try {
    collectives_->backend->allreduce(tensors)->wait();
  } catch (const std::exception& e) {
    throw_lost("an all-reduce", e.what());
  }
}

std::vector<int64_t> RankGroup::read_heartbeats() {
  std::vector<int64_t> beats;
  for (int r = 0; r < env_.world_size; ++r)
    beats.push_back(collectives_->store->add(fmt::format("beat/{}", r), 0));
  return beats;
}

void RankGroup::throw_lost(const std::string& during, const std::string& cause) {
  const std::string first_line = cause.substr(0, cause.find('\n'));
  std::vector<int> lost;
  try {
    const auto before = read_heartbeats();
    std::this_thread::sleep_for(kBeatSilence);
    const auto after = read_heartbeats();
    for (int r = 0; r < env_.world_size; ++r) {
      if (r != env_.rank && after[static_cast<size_t>(r)] == before[static_cast<size_t>(r)])
        lost.push_back(r);
    }
  } catch (const std::exception&) {
    throw RankLost(fmt::format("{} failed and the store at {}:{} is gone too, so {} was lost ({})",
                               during, env_.master_addr, env_.master_port,
                               env_.agent_store ? "the launcher" : "rank 0, which held it,",
                               first_line));
  }
  std::string names;
  for (const int r : lost) names += (names.empty() ? "" : ", ") + std::to_string(r);
  if (names.empty()) {
    throw RankLost(
        fmt::format("{} failed, though every rank still answers ({})", during, first_line));
  }
  throw RankLost(
      fmt::format("lost rank {} of {} during {} ({})", names, env_.world_size, during, first_line));
}

void RankGroup::agree(const std::string& topic,
                      const std::vector<std::pair<std::string, std::string>>& facts,
                      const std::string& local_error) {
  // One line per fact, "key TAB value"; the first line is the error, kept on one line.
  const auto one_line = [](std::string t) {
    std::replace(t.begin(), t.end(), '\n', ' ');
    std::replace(t.begin(), t.end(), '\t', ' ');
    return t;
  };
  std::string text = one_line(local_error) + "\n";
  for (const auto& [key, value] : facts) text += one_line(key) + "\t" + one_line(value) + "\n";
  const auto key_of = [&](int r) { return fmt::format("agree/{}/{}", topic, r); };
  std::vector<std::string> texts;
  try {
    collectives_->store->set(key_of(env_.rank), to_bytes(text));
    std::vector<std::string> keys;
    for (int r = 0; r < env_.world_size; ++r) keys.push_back(key_of(r));
    collectives_->store->wait(keys, timeout_);
    for (const std::string& key : keys) texts.push_back(from_bytes(collectives_->store->get(key)));
  } catch (const std::exception& e) {
    throw_lost("the start-up check of the " + topic, e.what());
  }
  const auto parse = [](const std::string& t) {
    std::vector<std::pair<std::string, std::string>> lines;
    size_t begin = t.find('\n') + 1;
    while (begin < t.size()) {
      const size_t end = t.find('\n', begin), tab = t.find('\t', begin);
      lines.emplace_back(t.substr(begin, tab - begin), t.substr(tab + 1, end - tab - 1));
      begin = end + 1;
    }
    return std::pair{t.substr(0, t.find('\n')), lines};
  };
  const auto [error0, facts0] = parse(texts[0]);
  for (int r = 0; r < env_.world_size; ++r) {
    const auto [error, lines] = parse(texts[static_cast<size_t>(r)]);
    if (!error.empty()) throw std::runtime_error(fmt::format("rank {} cannot start: {}", r, error));
  }
  for (int r = 1; r < env_.world_size; ++r) {
    const auto [error, lines] = parse(texts[static_cast<size_t>(r)]);
    for (size_t i = 0; i < std::max(lines.size(), facts0.size()); ++i) {
      const auto mine =
          i < lines.size() ? lines[i] : std::pair<std::string, std::string>{"(none)", ""};
      const auto theirs =
          i < facts0.size() ? facts0[i] : std::pair<std::string, std::string>{"(none)", ""};
      if (mine != theirs) {
        throw std::runtime_error(fmt::format(
            "rank {}'s {} differs from rank 0's at {}: {} against {}; every rank must run the "
            "same build with the same config",
            r, topic, mine.first == theirs.first ? mine.first : theirs.first, mine.second,
            theirs.second));
      }
    }
  }
}

}  // namespace tinylm
