// Rotary positions: the rotation against its formula, and the property it exists for: the
// score of q at position i and k at position j depends on i - j alone.

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "model/activation_cache.h"
#include "model/gpt.h"
#include "model/rope.h"
#include "small_model.h"

namespace tinylm {
namespace {

TEST(Rope, OnePairRotatesByPositionTimesTheta) {
  // hs = 2: theta_0 = 1, so position p rotates (x1, x2) by p radians.
  const RopeTables tables = rope_tables(4, 2);
  const torch::Tensor x = torch::tensor({{1.0f, 2.0f}}).expand({4, 2});  // (T, hs)
  const torch::Tensor r = apply_rope(x, tables);
  for (int p = 0; p < 4; ++p) {
    EXPECT_NEAR(r[p][0].item<float>(), std::cos(p) * 1 - std::sin(p) * 2, 1e-6);
    EXPECT_NEAR(r[p][1].item<float>(), std::sin(p) * 1 + std::cos(p) * 2, 1e-6);
  }
}

TEST(Rope, ScoreDependsOnlyOnTheDistance) {
  const int64_t T = 12, hs = 8;
  const RopeTables tables = rope_tables(T, hs);
  auto rng = at::make_generator<at::CPUGeneratorImpl>(4);
  const torch::Tensor q = torch::randn({hs}, rng), k = torch::randn({hs}, rng);
  // The same q at every position and the same k at every position: S[i, j] = rq_i . rk_j.
  const torch::Tensor rq = apply_rope(q.expand({T, hs}), tables),
                      rk = apply_rope(k.expand({T, hs}), tables);
  const torch::Tensor s = rq.matmul(rk.t());  // (T, T)
  for (int64_t i = 0; i + 1 < T; ++i) {
    for (int64_t j = 0; j + 1 < T; ++j) {
      EXPECT_NEAR(s[i][j].item<float>(), s[i + 1][j + 1].item<float>(), 1e-5) << i << "," << j;
    }
  }
  EXPECT_NEAR(s[0][0].item<float>(), q.dot(k).item<float>(), 1e-5);  // position 0 is the identity
  EXPECT_TRUE(torch::allclose(rq.norm(2, -1), q.norm().expand({T}), 1e-5));  // rotations keep norms
  EXPECT_GT((s[5][2] - s[5][3]).abs().item<float>(), 1e-3);  // and distance does matter
}

ModelConfig rope_config() { return test::small_config({"pos_encoding=rope"}); }

TEST(Rope, ModelRotatesQAndKOnlyAndAddsNoPositionTable) {
  GPT model(rope_config());
  auto rng = at::make_generator<at::CPUGeneratorImpl>(2);
  model->init_weights(rng);
  model->eval();
  EXPECT_FALSE(model->named_parameters().contains("transformer.wpe.weight"));
  const std::vector<std::string> names = model->hook_names();
  EXPECT_EQ(std::count(names.begin(), names.end(), "hook_pos_embed"), 0);
  const torch::Tensor tokens = torch::tensor({{1, 5, 2, 9, 5, 0}}, torch::kInt64);
  const CachedRun run = run_with_cache(model, tokens);
  const RopeTables& rope = model->transformer->h[1]->attn->rope();
  EXPECT_TRUE(torch::allclose(run.cache.at("blocks.1.attn.hook_rot_q"),
                              apply_rope(run.cache.at("blocks.1.attn.hook_q"), rope)));
  EXPECT_TRUE(torch::allclose(run.cache.at("blocks.1.attn.hook_rot_k"),
                              apply_rope(run.cache.at("blocks.1.attn.hook_k"), rope)));
  // Moving the same content later changes nothing but its position: a shifted copy of a
  // repeated token sees the same scores to its predecessor.
  EXPECT_THROW(([] {
                 ModelConfig c = rope_config();
                 c.n_embd = 6;
                 c.n_head = 2;
                 c.validate();
               })(),
               std::invalid_argument);  // head size 3 is odd
}

}  // namespace
}  // namespace tinylm
