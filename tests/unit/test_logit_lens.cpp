// The logit lens: its last stage is the model's own prediction.

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/analysis/logit_lens.h"
#include "small_model.h"

namespace tinylm {
namespace {

using test::random_model;

TEST(LogitLens, LastStageIsTheModelsOwnPrediction) {
  ModelConfig c = test::one_head_config(6, 9);
  c.n_layer = 3;
  GPT model = random_model(c);
  const torch::Tensor tokens = torch::tensor({{3, 0, 4, 4, 1, 2}}, torch::kInt64);
  const LogitLens lens = logit_lens(model, tokens, 3);
  EXPECT_EQ(lens.stages, (std::vector<std::string>{"embed", "block 0", "block 1", "block 2"}));
  ASSERT_EQ(lens.top_ids.sizes().vec(), (std::vector<int64_t>{4, 6, 3}));
  torch::NoGradGuard no_grad;
  const auto top = torch::softmax(model->forward(tokens)[0], -1).topk(3, -1);
  EXPECT_TRUE(torch::equal(lens.top_ids[3], std::get<1>(top)));
  EXPECT_TRUE(torch::allclose(lens.top_probs[3], std::get<0>(top), 1e-5, 1e-6));
  EXPECT_FALSE(torch::equal(lens.top_ids[0], lens.top_ids[3]));
}

}  // namespace
}  // namespace tinylm
