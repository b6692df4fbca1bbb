// The phase-change detector on readings whose answer is worked out by hand: a plateau, a
// linear rise of the probe's gap, a plateau again; noise, a lone outlier, a rise that has
// not settled.

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "test_util.h"

#include "train/run/phase_change.h"

namespace tinylm {
namespace {

// Two layers of two heads; previous-token head 0.1 jumps 0.1 -> 0.9 at step 1050, induction
// head 1.0 jumps 0.0 -> 0.6 at step 1100, the others stay where they start.
ProbeReading reading(int64_t step, double gap) {
  ProbeReading r;
  r.step = step;
  r.first_half = 4.0;
  r.second_half = 4.0 - gap;
  r.previous_token = torch::tensor({{0.1, step >= 1050 ? 0.9 : 0.1}, {0.2, 0.2}}, torch::kFloat64);
  r.induction = torch::tensor({{0.05, 0.05}, {step >= 1100 ? 0.6 : 0.0, 0.05}}, torch::kFloat64);
  return r;
}

// The gap: 0 up to step 1000, rising linearly to 3 nats at step 1200, then 3.
double linear_rise(int64_t step) {
  if (step <= 1000) return 0.0;
  if (step >= 1200) return 3.0;
  return 3.0 * static_cast<double>(step - 1000) / 200.0;
}

TEST(PhaseChange, ALinearRiseIsFoundOnceSettledAndDescribedExactly) {
  PhaseChangeDetector detector;
  std::optional<PhaseChange> found;
  int64_t found_at = -1;
  for (int64_t step = 0; step <= 2000; step += 25) {
    const auto now = detector.add(reading(step, linear_rise(step)));
    if (now) {
      EXPECT_FALSE(found) << "reported twice";
      found = now;
      found_at = step;
    }
  }
  ASSERT_TRUE(found);
  // The causal median lags a reading (it is the line at t - 25). The fastest rise over 4
  // readings is 1.5 nats; settled when the last 4 rose less than 0.3: line(t - 25) -
  // line(t - 125) < 0.3 first at t = 1325 (1300: 3 - 2.625).
  EXPECT_EQ(found_at, 1325);
  // The centred medians follow the line: the last step <= 0.3 is 1000, the first >= 1.5
  // is 1100, the first >= 2.7 is 1200 (1175 gives 2.625).
  EXPECT_EQ(found->start, 1000);
  EXPECT_EQ(found->step, 1100);
  EXPECT_EQ(found->end, 1200);
  EXPECT_DOUBLE_EQ(found->drop, 3.0);
  EXPECT_DOUBLE_EQ(found->gap, 3.0);
  EXPECT_EQ(found->previous_token.layer, 0);
  EXPECT_EQ(found->previous_token.head, 1);
  EXPECT_DOUBLE_EQ(found->previous_token.score, 0.9);
  EXPECT_EQ(found->previous_token.half_step, 1050);
  EXPECT_EQ(found->induction.layer, 1);
  EXPECT_EQ(found->induction.head, 0);
  EXPECT_EQ(found->induction.half_step, 1100);
  // Heads whose score never moved never crossed half of it.
  EXPECT_TRUE(torch::equal(found->previous_token_steps,
                           torch::tensor({{-1, 1050}, {-1, -1}}, torch::kInt64)));
  EXPECT_TRUE(
      torch::equal(found->induction_steps, torch::tensor({{-1, -1}, {1100, -1}}, torch::kInt64)));
  EXPECT_EQ(found->summary(),
            "phase change at step 1100: loss fell 3.00 nats in 200 steps; 0.1 previous-token, "
            "1.0 induction formed");
  EXPECT_EQ(detector.found()->step, 1100);

  const PhaseChange again = PhaseChange::from_json(found->to_json());
  EXPECT_EQ(again.to_json(), found->to_json());
}

TEST(PhaseChange, ARiseStillUnderwayIsNotDeclared) {
  PhaseChangeDetector detector;
  for (int64_t step = 0; step <= 1300; step += 25)
    EXPECT_FALSE(detector.add(reading(step, linear_rise(step)))) << step;
  EXPECT_TRUE(detector.add(reading(1325, linear_rise(1325))));
}

TEST(PhaseChange, APauseOnTheWayUpIsNotItsEnd) {
  // Up 1.5 nats from step 1000 to 1100, 75 steps still, up 1.5 more from 1175 to 1275.
  const auto paused = [](int64_t step) {
    const double s = static_cast<double>(step);
    if (step <= 1000) return 0.0;
    if (step <= 1100) return 1.5 * (s - 1000.0) / 100.0;
    if (step <= 1175) return 1.5;
    return std::min(3.0, 1.5 + 1.5 * (s - 1175.0) / 100.0);
  };
  PhaseChangeDetector detector;
  int64_t found_at = -1;
  for (int64_t step = 0; step <= 3000 && found_at < 0; step += 25)
    if (detector.add(reading(step, paused(step)))) found_at = step;
  // line(t - 25) - line(t - 125) < 0.3 first at t = 1400; in the pause it is 0.375.
  EXPECT_EQ(found_at, 1400);
  ASSERT_TRUE(detector.found());
  EXPECT_EQ(detector.found()->start, 1000);
  EXPECT_EQ(detector.found()->end, 1275);
  EXPECT_DOUBLE_EQ(detector.found()->drop, 3.0);
}

TEST(PhaseChange, NoiseAndALoneOutlierAreNoPhaseChange) {
  PhaseChangeDetector detector;
  for (int64_t step = 0; step <= 3000; step += 25) {
    // +-0.4 nats of noise, and one reading 5 nats off at step 1500.
    const double gap = step == 1500 ? 5.0 : 0.4 * std::sin(static_cast<double>(step));
    EXPECT_FALSE(detector.add(reading(step, gap))) << step;
  }
  EXPECT_FALSE(detector.found());
  EXPECT_EQ(detector.none_summary().rfind("no phase change by step 3000: the repeat is worth ", 0),
            0u)
      << detector.none_summary();
}

TEST(PhaseChange, ARiseSmallerThanANatIsNone) {
  PhaseChangeDetector detector;
  for (int64_t step = 0; step <= 2000; step += 25)
    EXPECT_FALSE(detector.add(reading(step, 0.3 * linear_rise(step))));
  EXPECT_EQ(detector.none_summary(), "no phase change by step 2000: the repeat is worth 0.90 nats");
}

// The readings of a fixture, one JSON object a line, as metrics.jsonl's probe records.
std::vector<ProbeReading> read_curve(const std::string& name) {
  std::ifstream in(test::fixtures() / name);
  EXPECT_TRUE(in) << name;
  const auto table = [](const nlohmann::json& rows) {
    std::vector<double> flat;
    for (const auto& row : rows)
      for (const auto& v : row) flat.push_back(v.get<double>());
    return torch::tensor(flat, torch::kFloat64).view({static_cast<int64_t>(rows.size()), -1});
  };
  std::vector<ProbeReading> curve;
  for (std::string line; std::getline(in, line);) {
    const auto r = nlohmann::json::parse(line);
    curve.push_back({r["step"].get<int64_t>(), r["loss_first_half"].get<double>(),
                     r["loss_second_half"].get<double>(), table(r["previous_token"]),
                     table(r["induction"])});
  }
  return curve;
}

// A fixture's readings fed to a detector, one by one, as training feeds them.
struct Replay {
  std::vector<ProbeReading> curve;
  PhaseChangeDetector detector;
  int64_t found_at = -1;  // the reading at which the detector spoke
};

Replay replay(const std::string& name) {
  Replay r{read_curve(name), {}, -1};
  for (const ProbeReading& reading : r.curve)
    if (r.detector.add(reading)) r.found_at = reading.step;
  return r;
}

// A real curve: the probe readings of `tinylm train configs/induction_four_heads.toml
// --train.dtype=float32` (seed 1337, 2 cores, 2026-12-03), every 25 steps to step 8000, as
// metrics.jsonl wrote them (tests/fixtures/induction_probe_readings.jsonl, losses rounded to
// 4 decimals). The gap creeps from 0 to 0.3 by step 3400 (the plateau), rises to 2.4 by
// 4400 and on to 3.2 by 4900.
TEST(PhaseChange, TheInductionRunsCurveIsAPlateauThenASharpDrop) {
  const Replay run = replay("induction_probe_readings.jsonl");
  const int64_t found_at = run.found_at;
  const ProbeReading& last = run.curve.back();
  EXPECT_EQ(last.step, 8000);
  ASSERT_TRUE(run.detector.found());
  const PhaseChange& pc = *run.detector.found();
  std::printf("[curve] %s (start %lld, end %lld, found at step %lld)\n", pc.summary().c_str(),
              static_cast<long long>(pc.start), static_cast<long long>(pc.end),
              static_cast<long long>(found_at));
  // Found as it happened: within a few hundred steps of the rise's end, not at the run's.
  EXPECT_GE(found_at, 4300);
  EXPECT_LE(found_at, 5000);
  // The plateau's end where the gap leaves 0.3, the drop's end where it nears 2.4.
  EXPECT_GE(pc.start, 3200);
  EXPECT_LE(pc.start, 3600);
  EXPECT_GE(pc.end, 4100);
  EXPECT_LE(pc.end, 4600);
  EXPECT_GT(pc.drop, 1.5);
  EXPECT_LE(pc.end - pc.start, pc.start / 2) << "a plateau, then a sharp drop";
  // The heads it names are the run's previous-token head in layer 0 and an induction head in
  // layer 1 (the strongest at the end of training: 1.3).
  EXPECT_EQ(pc.previous_token.layer, 0);
  EXPECT_EQ(pc.previous_token.head, last.previous_token[0].argmax().item<int64_t>());
  EXPECT_EQ(pc.induction.layer, 1);
  EXPECT_GT(last.induction[1][pc.induction.head].item<double>(), 0.8);
}

// The config's own curve: `tinylm train configs/induction.toml` (one head a layer, seed 1337,
// float32, 2 cores, 2026-12-03), every 25 steps to 3000
// (tests/fixtures/induction_one_head_probe_readings.jsonl). It logged the change at step 1900:
// a plateau to 1425, the drop over by 1775.
TEST(PhaseChange, TheOneHeadInductionRunsCurveIsFoundWithinItsDrop) {
  const Replay run = replay("induction_one_head_probe_readings.jsonl");
  ASSERT_EQ(run.curve.back().step, 3000);
  ASSERT_TRUE(run.detector.found());
  const PhaseChange& pc = *run.detector.found();
  EXPECT_EQ(run.found_at, 1900);
  EXPECT_EQ(pc.start, 1425);
  EXPECT_EQ(pc.end, 1775);
  EXPECT_EQ(pc.step, 1675);
  EXPECT_GT(pc.drop, 2.5);
  EXPECT_LE(pc.end - pc.start, pc.start / 2) << "a plateau, then a sharp drop";
  EXPECT_EQ(pc.previous_token.layer, 0);
  EXPECT_EQ(pc.previous_token.head, 0);
  EXPECT_EQ(pc.induction.layer, 1);
  EXPECT_EQ(pc.induction.head, 0);
}

}  // namespace
}  // namespace tinylm
