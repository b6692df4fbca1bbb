// The training loop end to end on a tiny model: it learns, it checkpoints, and a run stopped
// and resumed is the same run, step for step, bit for bit.

#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "data/io/files.h"
#include "test_util.h"
#include "train/run/checkpoint.h"
#include "train/run/safetensors.h"
#include "train/trainer.h"

namespace tinylm {
namespace {

using nlohmann::json;
using test::TempDir;

RunConfig tiny_config(int max_iters) {
  TempDir scratch;
  RunConfig c =
      load_run_config(test::write_tiny_config(scratch.path(), test::shakespeare(), max_iters));
  c.train.eval_interval = 4;
  c.train.learning_rate = 3e-3;
  return c;
}

// metrics.jsonl without the wall-clock fields, which differ from run to run (the closing
// `time` record is nothing else).
std::vector<json> losses(const std::filesystem::path& run) {
  std::vector<json> out;
  std::istringstream lines(test::read_text(run / "metrics.jsonl"));
  for (std::string line; std::getline(lines, line);) {
    json record = json::parse(line);
    if (record["kind"] == "time") continue;
    for (const char* timing : {"elapsed_s", "ms_per_iter", "tokens_per_s"}) record.erase(timing);
    out.push_back(record);
  }
  return out;
}

// Of those, the training steps' records.
std::vector<json> train_records(const std::filesystem::path& run) {
  std::vector<json> out;
  for (json& record : losses(run))
    if (record["kind"] == "train") out.push_back(std::move(record));
  return out;
}

using Resumable = std::pair<Sampling, OptimizerKind>;
class ResumedRun : public ::testing::TestWithParam<Resumable> {};

// With random windows, with epoch sampling (whose place in the epoch the checkpoint keeps),
// and with Muon (whose momentum it keeps). train.dtype is auto: bfloat16 where this CPU has
// it, so resume is checked in the precision this machine trains in.
INSTANTIATE_TEST_SUITE_P(SamplingAndOptimizer, ResumedRun,
                         ::testing::Values(Resumable{Sampling::kRandom, OptimizerKind::kAdamW},
                                           Resumable{Sampling::kEpoch, OptimizerKind::kAdamW},
                                           Resumable{Sampling::kRandom, OptimizerKind::kMuon}),
                         [](const auto& info) {
                           return std::string(name_of(info.param.first)) + "_" +
                                  name_of(info.param.second);
                         });

TEST_P(ResumedRun, EqualsUnbrokenRun) {
  RunConfig config = tiny_config(12);
  config.data.sampling = GetParam().first;
  config.train.optimizer = GetParam().second;
  config.train.probe_interval = 3;  // readings the resumed run's detector replays
  TempDir unbroken, resumed;
  TrainOptions options;
  options.progress = false;
  options.out_dir = unbroken.path() / "run";
  EXPECT_EQ(train(config, options).outcome, TrainOutcome::kFinished);

  // Stop after step 6 the way Ctrl-C does (between evals at 4 and 8), then resume.
  std::atomic<bool> stop{false};
  options.out_dir = resumed.path() / "run";
  options.stop_requested = &stop;
  options.on_step = [&](int64_t step) { stop = step == 6; };
  const TrainResult first = train(config, options);
  EXPECT_EQ(first.outcome, TrainOutcome::kInterrupted);
  EXPECT_EQ(first.step, 6);
  EXPECT_EQ(load_training_state(options.out_dir).step, 6);
  stop = false;
  options.on_step = nullptr;
  options.resume = true;
  EXPECT_EQ(train(config, options).outcome, TrainOutcome::kFinished);

  const std::vector<json> a = losses(unbroken.path() / "run"), b = losses(resumed.path() / "run");
  // 12 train lines, evals at 0, 4, 8, 12, probe readings at 0, 3, 4, 6, 8, 9, 12.
  ASSERT_EQ(a.size(), 12u + 4u + 7u);
  EXPECT_EQ(a, b);
  const auto wa = load_safetensors(unbroken.path() / "run/model.safetensors").tensors;
  const auto wb = load_safetensors(resumed.path() / "run/model.safetensors").tensors;
  for (const auto& [name, tensor] : wa) EXPECT_TRUE(torch::equal(tensor, wb.at(name))) << name;
  // The heads' snapshots too: at steps 0, 1, 2, 5, 10 and the evals, byte for byte.
  const auto snapshots = [](const std::filesystem::path& run) {
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(run / "snapshots"))
      names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  };
  const std::vector<std::string> names = snapshots(unbroken.path() / "run");
  EXPECT_EQ(names,
            (std::vector<std::string>{"step_00000000.safetensors", "step_00000001.safetensors",
                                      "step_00000002.safetensors", "step_00000004.safetensors",
                                      "step_00000005.safetensors", "step_00000008.safetensors",
                                      "step_00000010.safetensors", "step_00000012.safetensors"}));
  EXPECT_EQ(snapshots(resumed.path() / "run"), names);
  for (const std::string& name : names) {
    EXPECT_EQ(read_file(unbroken.path() / "run/snapshots" / name),
              read_file(resumed.path() / "run/snapshots" / name))
        << name;
  }
}

TEST(Training, SnapshotsChangeNothingTheRunLearns) {
  // Snapshots read the model and draw no random number: with them off, the same weights.
  TempDir with, without;
  RunConfig config = tiny_config(6);
  TrainOptions options;
  options.progress = false;
  options.out_dir = with.path() / "run";
  train(config, options);
  config.train.snapshots = false;
  options.out_dir = without.path() / "run";
  train(config, options);
  EXPECT_EQ(read_file(with.path() / "run/model.safetensors"),
            read_file(without.path() / "run/model.safetensors"));
  EXPECT_TRUE(std::filesystem::is_directory(with.path() / "run/snapshots"));
  EXPECT_FALSE(std::filesystem::exists(without.path() / "run/snapshots"));
}

TEST(Training, WritesTheRunDirectoryAndLearns) {
  RunConfig config = tiny_config(40);
  TempDir dir;
  TrainOptions options;
  options.progress = false;
  options.out_dir = dir / "run";
  const TrainResult result = train(config, options);
  EXPECT_EQ(result.step, 40);
  for (const char* file : {"config.toml", "config.json", "tokenizer.json", "model.safetensors",
                           "optimizer.safetensors", "state.json", "metrics.jsonl",
                           "best/model.safetensors", "best/state.json"}) {
    EXPECT_TRUE(std::filesystem::exists(options.out_dir / file)) << file;
  }
  std::vector<json> evals;
  for (const json& record : losses(options.out_dir))
    if (record["kind"] == "eval") evals.push_back(record);
  ASSERT_FALSE(evals.empty());
  const json first_eval = evals.front(), last_eval = evals.back();
  EXPECT_EQ(first_eval["step"], 0);
  EXPECT_EQ(last_eval["step"], 40);
  EXPECT_LT(last_eval["val_loss"].get<double>(), first_eval["val_loss"].get<double>() - 0.5);
  const TrainingState state = load_training_state(options.out_dir);
  EXPECT_EQ(state.step, 40);
  EXPECT_LE(state.best_val_loss, last_eval["val_loss"].get<double>());
  // The optimizer moments are saved for every parameter.
  const auto moments = load_safetensors(options.out_dir / "optimizer.safetensors").tensors;
  EXPECT_TRUE(moments.count("exp_avg.transformer.wte.weight"));
  EXPECT_TRUE(moments.count("exp_avg_sq.transformer.h.1.mlp.c_fc.bias"));
  EXPECT_EQ(moments.at("step").item<int64_t>(), 40);
}

TEST(Training, AccumulatingTwoHalfBatchesEqualsOneFullBatch) {
  // Two micro-batches of 4 draw the same windows as one batch of 8 (the generator's stream
  // is consumed in order), and the mean of their mean losses is the mean loss: the losses and
  // updates must agree up to float rounding.
  RunConfig full = tiny_config(6), accumulated = tiny_config(6);
  full.train.batch_size = 8;
  accumulated.train.batch_size = 4;
  accumulated.train.gradient_accumulation_steps = 2;
  TempDir a, b;
  TrainOptions options;
  options.progress = false;
  options.out_dir = a / "run";
  train(full, options);
  options.out_dir = b / "run";
  train(accumulated, options);
  const std::vector<json> la = train_records(a / "run"), lb = train_records(b / "run");
  ASSERT_EQ(la.size(), 6u);
  ASSERT_EQ(lb.size(), 6u);
  for (size_t i = 0; i < la.size(); ++i)
    EXPECT_NEAR(la[i]["loss"].get<double>(), lb[i]["loss"].get<double>(), 1e-4) << la[i].dump();
}

// With 2 threads each step's rows go half to each thread's replica of the model
// (train/thread_replicas.h): the run is the one a single thread trains through the same
// halves as micro-batches, to the bit (in float32 with AdamW, whose update is the same at any
// thread count). The evals draw batch_size rows, so only the training is compared.
TEST(Training, TwoThreadReplicasTrainWhatOneThreadTrainsInTheirHalves) {
  RunConfig replicated = tiny_config(6), halves = tiny_config(6);
  for (RunConfig* c : {&replicated, &halves}) {
    c->train.dtype = Dtype::kFloat32;
    c->train.optimizer = OptimizerKind::kAdamW;
  }
  replicated.train.batch_size = 8;
  halves.train.batch_size = 4;
  halves.train.gradient_accumulation_steps = 2;
  TempDir a, b;
  TrainOptions options;
  options.progress = false;
  const int threads = at::get_num_threads();
  at::set_num_threads(2);
  options.out_dir = a / "run";
  train(replicated, options);
  at::set_num_threads(1);
  options.out_dir = b / "run";
  train(halves, options);
  at::set_num_threads(threads);
  const std::vector<json> la = train_records(a / "run");
  EXPECT_EQ(la.size(), 6u);
  EXPECT_EQ(la, train_records(b / "run"));
  const auto wa = load_safetensors(a / "run/model.safetensors").tensors;
  const auto wb = load_safetensors(b / "run/model.safetensors").tensors;
  for (const auto& [name, tensor] : wa) EXPECT_TRUE(torch::equal(tensor, wb.at(name))) << name;
}

TEST(Training, RefusesToOverwriteOrResumeWhatIsNotARun) {
  const RunConfig config = tiny_config(2);
  TempDir dir;
  std::filesystem::create_directories(dir / "full");
  test::write_text(dir / "full/notes.txt", "mine");
  TrainOptions options;
  options.progress = false;
  options.out_dir = dir / "full";
  EXPECT_THROW(train(config, options), std::runtime_error);
  options.resume = true;
  EXPECT_THROW(train(config, options), std::runtime_error);
  EXPECT_EQ(test::read_text(dir / "full/notes.txt"), "mine");
}

}  // namespace
}  // namespace tinylm
