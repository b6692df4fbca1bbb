#include "train/run_breakdown.h"

#include <unistd.h>

#include <fstream>
#include <optional>
#include <sstream>

#include <fmt/format.h>

namespace tinylm {

namespace {

using Clock = std::chrono::steady_clock;
const Clock::time_point process_start = Clock::now();  // static initialisation: before main

constexpr const char* kPartNames[RunBreakdown::kParts] = {
    "start-up", "data", "steps", "evals", "final eval", "probes", "snapshots", "checkpoints"};

}  // namespace

namespace {

// The kernel's clock: the process's start time (/proc/self/stat's 22nd field, in clock
// ticks since boot) against the time since boot. It counts the dynamic loader's work too:
// loading LibTorch comes before any static initialisation of ours.
std::optional<double> kernel_seconds_since_start() {
  std::ifstream stat("/proc/self/stat"), uptime("/proc/uptime");
  std::string text((std::istreambuf_iterator<char>(stat)), {});
  const size_t name_end = text.rfind(')');  // the command's name may hold spaces
  if (name_end == std::string::npos) return std::nullopt;
  std::istringstream fields(text.substr(name_end + 2));
  std::string field;
  for (int i = 3; i <= 22 && fields >> field; ++i) {}  // fields 3..22; the last read is 22
  double up = 0.0;
  if (!(uptime >> up) || field.empty()) return std::nullopt;
  const double started = std::stod(field) / static_cast<double>(::sysconf(_SC_CLK_TCK));
  return up - started;
}

}  // namespace

double RunBreakdown::since_process_start() {
  // The kernel's start time is read once and the steady clock goes on from it: /proc/uptime
  // counts in clock ticks (10 ms), so two readings of it put up to 20 ms between a run's
  // start-up and its wall time that no part had, and "other" came out below zero.
  static const Clock::time_point start = [] {
    const Clock::time_point now = Clock::now();
    const auto kernel = kernel_seconds_since_start();
    if (!kernel || *kernel < 0) return process_start;
    return now -
           std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(*kernel));
  }();
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::vector<std::pair<std::string, double>> RunBreakdown::parts(double wall) const {
  std::vector<std::pair<std::string, double>> out;
  double counted = 0.0;
  for (int p = 0; p < kParts; ++p) {
    out.emplace_back(kPartNames[p], seconds_[p]);
    counted += seconds_[p];
  }
  out.emplace_back("other", wall - counted);
  return out;
}

std::string RunBreakdown::summary(double wall) const {
  std::string out = fmt::format("time: {:.1f} s wall:", wall);
  bool first = true;
  for (const auto& [name, s] : parts(wall)) {
    out += fmt::format("{}{} {:.1f} s ({:.1f}%)", first ? " " : ", ", name, s,
                       wall > 0 ? 100.0 * s / wall : 0.0);
    first = false;
  }
  return out;
}

}  // namespace tinylm
