#pragma once
// The induction phase change (Olsson et al. 2022) found as it happens, from cheap readings of
// the induction probe (model/analysis/induction_probe.h) taken every few steps: a plateau,
// then a sudden fall of the loss on the probe's repeat, as a previous-token head and an
// induction head form together.
//
// The signal is the probe's gap, first half's loss minus second half's: what the repeat is
// worth. Learning which tokens are common lowers both halves alike, so the gap stays near 0
// on the plateau, and it jumps when induction heads form. Readings are smoothed by a median
// of three, which drops a lone outlier. The phase change is declared at the first reading
// where the smoothed gap (of that reading and the two before) has risen at least kMinRise
// nats above its lowest so far and has settled: it is within a tenth of the rise below its
// high, and it rose over the last kSettle readings by less than a fifth of the most it rose
// over as many readings so far (a pause shorter than that on the way up is not its end).
// Then, from medians centred on each reading:
//   start  the last reading before the rise still within a tenth of it above the low;
//   step   the first reading after that halfway up: the step the log names;
//   end    the first reading after that within a tenth of it below the high;
//   drop   how far the second half's (smoothed) loss fell from start to end;
//   heads  the top previous-token and induction heads at the end, each with the step at
//          which its score first reached half its value at the end.
// A run that never rises that far reports none (the same detector runs on every training).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <torch/torch.h>
#include <nlohmann/json.hpp>

namespace tinylm {

struct ProbeReading {
  int64_t step = 0;
  double first_half = 0.0, second_half = 0.0;  // mean nats
  torch::Tensor previous_token, induction;     // (L, nh) scores
};

struct FormedHead {
  int64_t layer = 0, head = 0;
  double score = 0.0;     // at the phase change's end
  int64_t half_step = 0;  // the first step its score reached half that
};

struct PhaseChange {
  int64_t start = 0, step = 0, end = 0;
  double drop = 0.0;  // nats the repeat's loss fell from start to end
  double gap = 0.0;   // nats the repeat is worth at the end
  FormedHead previous_token, induction;
  // Every head's half step as FormedHead's, by kind: (L, nh), -1 where the score was at
  // half its end value from the first reading (it never crossed).
  torch::Tensor previous_token_steps, induction_steps;

  // "phase change at step 4400: loss fell 3.1 nats in 300 steps; 0.1 previous-token, 1.2
  // induction formed"
  std::string summary() const;
  nlohmann::json to_json() const;
  static PhaseChange from_json(const nlohmann::json& doc);
};

class PhaseChangeDetector {
 public:
  static constexpr double kMinRise = 1.0;  // nats: a change, not noise (the probe's noise is ~0.1)
  static constexpr int kSettle = 4;        // readings the rise must have stopped for, at least

  // Adds a reading (steps increasing); returns the phase change at the reading that
  // completes it, once per run.
  std::optional<PhaseChange> add(ProbeReading reading);

  const std::optional<PhaseChange>& found() const { return found_; }
  // "no phase change by step 700: the repeat is worth 0.02 nats"
  std::string none_summary() const;

 private:
  double smoothed_gap(size_t i, bool causal) const;
  double smoothed_second_half(size_t i) const;
  PhaseChange describe() const;

  std::vector<ProbeReading> readings_;
  std::vector<double> gaps_;   // the causal medians, one per reading
  size_t low_ = 0, high_ = 0;  // the lowest of gaps_, and the highest after it
  double fastest_ = 0.0;       // the largest rise of gaps_ over kSettle readings
  std::optional<PhaseChange> found_;
};

}  // namespace tinylm
