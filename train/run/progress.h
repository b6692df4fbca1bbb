#pragma once
// A one-line live progress display on stderr (step, loss, tokens/s, ETA; or bytes, rate, ETA),
// redrawn in place when stderr is a terminal and silent otherwise. Log lines call clear() first so
// that the two never interleave on one line.

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>

namespace tinylm {

class ProgressLine {
 public:
  explicit ProgressLine(bool enabled) : enabled_(enabled && ::isatty(STDERR_FILENO)) {}
  ~ProgressLine() { clear(); }

  void update(int64_t step, int64_t total, double loss, double tokens_per_s, double eta_s) {
    if (!enabled_) return;
    const auto now = std::chrono::steady_clock::now();
    if (step < total && now - last_draw_ < std::chrono::milliseconds(100)) return;  // ~10 redraws/s
    last_draw_ = now;
    const auto eta = static_cast<int64_t>(eta_s + 0.5);
    std::fprintf(stderr, "\r\033[K step %lld/%lld | loss %.4f | %.0f tok/s | ETA %lld:%02lld",
                 static_cast<long long>(step), static_cast<long long>(total), loss, tokens_per_s,
                 static_cast<long long>(eta / 60), static_cast<long long>(eta % 60));
    std::fflush(stderr);
    shown_ = true;
  }

  // "tokenizing 45% | 312/690 MB | 10.2 MB/s | ETA 0:37"
  void update_bytes(const char* what, uint64_t done, uint64_t total, double seconds) {
    if (!enabled_) return;
    const auto now = std::chrono::steady_clock::now();
    if (done < total && now - last_draw_ < std::chrono::milliseconds(100)) return;
    last_draw_ = now;
    const double rate = seconds > 0 ? static_cast<double>(done) / seconds : 0.0;  // bytes/s
    const auto eta =
        static_cast<int64_t>(rate > 0 ? static_cast<double>(total - done) / rate + 0.5 : 0);
    std::fprintf(stderr, "\r\033[K %s %3.0f%% | %.1f/%.1f MB | %.1f MB/s | ETA %lld:%02lld", what,
                 total ? 100.0 * static_cast<double>(done) / static_cast<double>(total) : 100.0,
                 static_cast<double>(done) / 1e6, static_cast<double>(total) / 1e6, rate / 1e6,
                 static_cast<long long>(eta / 60), static_cast<long long>(eta % 60));
    std::fflush(stderr);
    shown_ = true;
  }

  void clear() {
    if (!shown_) return;
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
    shown_ = false;
  }

 private:
  bool enabled_;
  bool shown_ = false;
  std::chrono::steady_clock::time_point last_draw_{};
};

}  // namespace tinylm
