// ScopedMode: the module's mode restored on every way out of a scope.

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/scoped_mode.h"
#include "small_model.h"

namespace tinylm {
namespace {

TEST(ScopedMode, RestoresTheModeOnEveryWayOut) {
  GPT model = test::random_model(test::small_config());
  model->train();
  try {
    const ScopedMode eval = eval_mode(*model);
    EXPECT_FALSE(model->is_training());
    throw std::runtime_error("out");
  } catch (const std::runtime_error&) {}
  EXPECT_TRUE(model->is_training());
  model->eval();
  {
    const ScopedMode training(*model, true);
    EXPECT_TRUE(model->is_training());
  }
  EXPECT_FALSE(model->is_training());
}

}  // namespace
}  // namespace tinylm
