// What the lab keeps of one checkpoint between requests: a view asked for again, or another
// view of the same prompt, window set or text, computes nothing again, and what it answers
// equals a fresh inspection's; a request with heads ablated neither reads nor fills it.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_util.h"
#include "tools/inspect/inspect_request.h"
#include "tools/inspect/inspection_cache.h"
#include "tools/inspect/inspection_json.h"
#include "train/trainer.h"

namespace tinylm {
namespace {

namespace fs = std::filesystem;

class InspectionCacheTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir;
    TrainOptions options;
    options.out_dir = dir_->path() / "run";
    options.progress = false;
    const fs::path config = test::write_tiny_config(dir_->path(), test::shakespeare(), 4);
    ASSERT_EQ(train(load_run_config(config), options).outcome, TrainOutcome::kFinished);
    run_ = new LoadedRun(load_run(options.out_dir));
  }
  static void TearDownTestSuite() {
    delete run_;
    delete dir_;
  }
  static fs::path run_dir() { return dir_->path() / "run"; }

  // The JSON of `view` as an inspection with (or without) the cache answers it.
  static nlohmann::json answer(const InspectArgs& args, InspectionCache* kept,
                               const std::string& view) {
    const nlohmann::json doc = inspection_json(run_inspection(*run_, run_dir(), args, kept), *run_);
    EXPECT_TRUE(doc.contains(view)) << view;
    return doc.value(view, nlohmann::json());
  }

  static InspectArgs window_args(bool heads, bool ablate) {
    InspectArgs args;
    args.heads = heads;
    args.ablate = ablate;
    args.windows = 4;
    args.probes = 2;
    args.exact = "2";
    return args;
  }

  static test::TempDir* dir_;
  static LoadedRun* run_;
};

test::TempDir* InspectionCacheTest::dir_ = nullptr;
LoadedRun* InspectionCacheTest::run_ = nullptr;

TEST_F(InspectionCacheTest, AWindowSetIsSurveyedOnceForHeadsAndAblation) {
  InspectionCache cache;
  const InspectArgs heads = window_args(true, false), both = window_args(true, true);
  const nlohmann::json fresh_heads = answer(heads, nullptr, "heads"),
                       fresh_ablation = answer(both, nullptr, "ablation");

  EXPECT_EQ(answer(heads, &cache, "heads"), fresh_heads);
  EXPECT_EQ(cache.computed(), 1);  // the surveys, with scores only
  // Ablation needs the gradients: surveyed again with both, and its table made.
  EXPECT_EQ(answer(both, &cache, "ablation"), fresh_ablation);
  EXPECT_EQ(cache.computed(), 3);
  // Both kept now: the scores from the surveys with gradients are the same scores.
  EXPECT_EQ(answer(heads, &cache, "heads"), fresh_heads);
  EXPECT_EQ(answer(both, &cache, "heads"), fresh_heads);
  EXPECT_EQ(answer(both, &cache, "ablation"), fresh_ablation);
  EXPECT_EQ(cache.computed(), 3);

  // Another --exact is another table from the same surveys; another seed another window set.
  InspectArgs more_exact = both;
  more_exact.exact = "all";
  EXPECT_EQ(answer(more_exact, &cache, "ablation"), answer(more_exact, nullptr, "ablation"));
  EXPECT_EQ(cache.computed(), 4);
  InspectArgs reseeded = heads;
  reseeded.seed = 7;
  const nlohmann::json other = answer(reseeded, &cache, "heads");
  EXPECT_EQ(cache.computed(), 5);
  EXPECT_NE(other, fresh_heads);
  EXPECT_EQ(answer(heads, &cache, "heads"), fresh_heads);  // the first set is still kept
  EXPECT_EQ(cache.computed(), 5);
}

TEST_F(InspectionCacheTest, TextViewsAndPromptPassesAreKeptByWhatTheyRead) {
  InspectionCache cache;
  InspectArgs text;
  text.positions = text.drift = true;
  text.tokens = 512;
  const nlohmann::json positions = answer(text, nullptr, "position_loss"),
                       drift = answer(text, nullptr, "context_drift");
  EXPECT_EQ(answer(text, &cache, "position_loss"), positions);
  EXPECT_EQ(cache.computed(), 2);
  EXPECT_EQ(answer(text, &cache, "context_drift"), drift);
  EXPECT_EQ(cache.computed(), 2);
  InspectArgs fewer = text;
  fewer.tokens = 256;
  EXPECT_NE(answer(fewer, &cache, "position_loss"), positions);
  EXPECT_EQ(cache.computed(), 4);

  InspectArgs prompt;
  prompt.prompt = "To be, or not";
  prompt.logit_lens = prompt.attribution = true;
  const nlohmann::json lens = answer(prompt, nullptr, "logit_lens");
  EXPECT_EQ(answer(prompt, &cache, "logit_lens"), lens);
  EXPECT_EQ(answer(prompt, &cache, "attribution"), answer(prompt, nullptr, "attribution"));
  EXPECT_EQ(cache.prompts.passes(), 1);
}

TEST_F(InspectionCacheTest, HeadsAblatedAreAnotherModelAndLeaveTheCacheAlone) {
  InspectionCache cache;
  const InspectArgs both = window_args(true, true);
  const nlohmann::json clean = answer(both, &cache, "ablation");
  ASSERT_EQ(cache.computed(), 2);
  InspectArgs ablated = both;
  ablated.ablate_heads = "0.0";
  ablated.prompt = "To be";
  const nlohmann::json with_head_gone = answer(ablated, &cache, "ablation");
  EXPECT_NE(with_head_gone, clean);
  EXPECT_EQ(cache.computed(), 2);
  EXPECT_EQ(cache.prompts.passes(), 0);
  EXPECT_EQ(answer(both, &cache, "ablation"), clean);
}

}  // namespace
}  // namespace tinylm
