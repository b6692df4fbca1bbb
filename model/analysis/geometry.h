#pragma once
// The geometry of what the embeddings learned.
//   positions   the cosine similarity of every pair of position vectors: the wpe rows
//               (learned) or the table (sinusoidal); for rope, the kernel the rotation
//               induces between positions i and j for the same content, the mean over its
//               frequencies of cos((i - j) theta). None without positions.
//   shift       for each offset k, how far PE(pos + k) is from a linear function of PE(pos):
//               the least-squares M_k fitted on even positions, and the relative residual
//               ||PE(pos) M_k - PE(pos + k)||_F / ||PE(pos + k)||_F on odd ones (held out:
//               with fewer positions than channels any table fits exactly). Zero, to float
//               precision, for the sinusoidal table, whose shifts are rotations.
//               For relative and alibi positions, each head's score bias at each distance.
//   tokens      each token's nearest neighbours by cosine similarity of the token
//               embeddings, and a 2-D PCA map of them (the top two principal components).

#include <cstdint>
#include <string>

#include <torch/torch.h>

#include "model/gpt.h"

namespace tinylm {

struct PositionGeometry {
  std::string kind;              // model.pos_encoding
  torch::Tensor similarity;      // (P, P) float64; undefined for none, relative and alibi
  torch::Tensor shift_residual;  // (K,) for k = 1..K; for learned and sinusoidal only
  torch::Tensor distance_bias;   // (L, nh, P) float64: b_h(d), d = 0 .. P - 1; relative, alibi
};

// The first min(block_size, max_positions) positions, offsets 1..max_offset.
PositionGeometry position_geometry(GPT& model, int64_t max_positions = 64, int64_t max_offset = 16);

// The held-out residual of the definition above for a table (P, C).
torch::Tensor linear_shift_residual(const torch::Tensor& table, int64_t max_offset);

struct EmbeddingGeometry {
  torch::Tensor neighbours;  // (V, k) int64, most similar first, the token itself left out
  torch::Tensor similarity;  // (V, k) float64: their cosine similarities
  torch::Tensor map;         // (V, 2) float64: the embeddings on their top two components
  torch::Tensor explained;   // (2,): the share of the variance each component holds
};

EmbeddingGeometry embedding_geometry(GPT& model, int64_t k = 5);

// a is to b as c is to ...: the k tokens whose embeddings are nearest by cosine similarity
// to e_b - e_a + e_c (king - man + woman), a, b and c themselves left out.
struct Analogy {
  torch::Tensor ids;         // (k,) int64, most similar first
  torch::Tensor similarity;  // (k,) float64
};
Analogy embedding_analogy(GPT& model, int64_t a, int64_t b, int64_t c, int64_t k = 5);

}  // namespace tinylm
