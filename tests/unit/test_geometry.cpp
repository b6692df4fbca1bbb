// Embedding geometry: the sinusoidal table's shifts are linear (to float precision), a random
// table's are not; rope's kernel depends on i - j alone; nearest neighbours and the PCA map on
// a worked example.

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "model/analysis/geometry.h"
#include "small_model.h"

namespace tinylm {
namespace {

TEST(Geometry, SinusoidalShiftsAreLinearAndRandomOnesAreNot) {
  for (const int64_t C : {16, 128}) {  // more positions than channels, and fewer
    const torch::Tensor residual = linear_shift_residual(sinusoidal_positions(64, C), 8);
    EXPECT_LT(residual.max().item<double>(), 1e-5) << "C " << C << ": " << residual;
  }
  torch::manual_seed(3);
  const torch::Tensor random = linear_shift_residual(torch::randn({64, 16}), 8);
  EXPECT_GT(random.min().item<double>(), 0.5) << random;
  // With more channels than positions any table fits its own rows exactly: only the held-out
  // rows tell a random one from a structured one.
  const torch::Tensor wide = linear_shift_residual(torch::randn({64, 128}), 8);
  EXPECT_GT(wide.min().item<double>(), 0.5) << wide;
}

TEST(Geometry, PositionsOfEachEncoding) {
  for (const char* kind : enum_names(PosEncoding{})) {
    GPT model = test::random_model(test::small_config({std::string("pos_encoding=") + kind}));
    const PositionGeometry g = position_geometry(model);
    EXPECT_EQ(g.kind, kind);
    if (std::string(kind) == "alibi" || std::string(kind) == "relative") {
      // No vectors: each head's bias per distance, the scores' own row read backwards.
      EXPECT_FALSE(g.similarity.defined());
      ASSERT_EQ(g.distance_bias.sizes(), (std::vector<int64_t>{2, 2, 8}));
      const torch::Tensor want = model->transformer->h[1]->attn->score_bias(8, 8)[0][7];  // (8,)
      for (int64_t d = 0; d < 8; ++d)
        EXPECT_EQ(g.distance_bias[1][0][d].item<double>(), want[7 - d].item<double>()) << kind;
      continue;
    }
    EXPECT_FALSE(g.distance_bias.defined());
    if (std::string(kind) == "none") {
      EXPECT_FALSE(g.similarity.defined());
      continue;
    }
    ASSERT_EQ(g.similarity.sizes(), (std::vector<int64_t>{8, 8}));  // block_size 8
    EXPECT_TRUE(torch::allclose(g.similarity.diagonal(), torch::ones({8}, torch::kFloat64)));
    if (std::string(kind) == "rope") {
      // A rotation's kernel: the same along every diagonal.
      EXPECT_NEAR(g.similarity[5][2].item<double>(), g.similarity[3][0].item<double>(), 1e-6);
      EXPECT_NEAR(g.similarity[2][5].item<double>(), g.similarity[5][2].item<double>(), 1e-6);
      EXPECT_FALSE(g.shift_residual.defined());
    } else {
      EXPECT_EQ(g.shift_residual.size(0), 6);  // offsets 1..min(16, P - 2)
    }
  }
}

TEST(Geometry, NeighboursAndMapWorkedExample) {
  // Embeddings (1, 0), (0.9, 0.1), (0, 1), (-1, 0): token 0's nearest is 1 (cos 0.9 /
  // sqrt(0.82)), then 2 (0), then 3 (-1). In 2-D the two components hold all the variance.
  GPT model(test::small_config({"n_embd=2", "n_head=1"}, 4));
  {
    torch::NoGradGuard no_grad;
    model->transformer->wte->weight.copy_(
        torch::tensor({{1.0f, 0.0f}, {0.9f, 0.1f}, {0.0f, 1.0f}, {-1.0f, 0.0f}}));
  }
  const EmbeddingGeometry g = embedding_geometry(model, 5);
  ASSERT_EQ(g.neighbours.sizes(), (std::vector<int64_t>{4, 3}));  // k capped at V - 1
  EXPECT_TRUE(torch::equal(g.neighbours[0], torch::tensor({1, 2, 3}, torch::kInt64)));
  EXPECT_NEAR(g.similarity[0][0].item<double>(), 0.9 / std::sqrt(0.82), 1e-6);
  EXPECT_NEAR(g.similarity[0][2].item<double>(), -1.0, 1e-6);
  EXPECT_NEAR(g.explained.sum().item<double>(), 1.0, 1e-9);
  EXPECT_GE(g.explained[0].item<double>(), g.explained[1].item<double>());
  // The map keeps distances when nothing is dropped: |x0 - x3| = 2.
  EXPECT_NEAR((g.map[0] - g.map[3]).norm().item<double>(), 2.0, 1e-6);
}

TEST(Geometry, AnalogyWorkedExample) {
  // man (1, 0, 0), woman (1, 1, 0), king (0, 0, 1), queen (0, 1, 1), prince (0, 0.2, 1):
  // king - man + woman = (0, 1, 1) is queen exactly, then prince (cos 1.2 / sqrt(2 * 1.04)).
  GPT model(test::small_config({"n_embd=3", "n_head=1"}, 5));
  {
    torch::NoGradGuard no_grad;
    model->transformer->wte->weight.copy_(torch::tensor({{1.0f, 0.0f, 0.0f},
                                                         {1.0f, 1.0f, 0.0f},
                                                         {0.0f, 0.0f, 1.0f},
                                                         {0.0f, 1.0f, 1.0f},
                                                         {0.0f, 0.2f, 1.0f}}));
  }
  const Analogy a = embedding_analogy(model, /*man*/ 0, /*woman*/ 1, /*king*/ 2, 5);
  ASSERT_EQ(a.ids.size(0), 2);  // a, b and c left out
  EXPECT_EQ(a.ids[0].item<int64_t>(), 3);
  EXPECT_NEAR(a.similarity[0].item<double>(), 1.0, 1e-6);
  EXPECT_EQ(a.ids[1].item<int64_t>(), 4);
  EXPECT_NEAR(a.similarity[1].item<double>(), 1.2 / std::sqrt(2 * 1.04), 1e-6);
}

}  // namespace
}  // namespace tinylm
