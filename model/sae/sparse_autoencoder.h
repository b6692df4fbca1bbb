#pragma once
// A sparse autoencoder (SAE) on one hook point's activations, TopK as Gao et al. (2024)
// define it: an activation x of d_in numbers is encoded as
//     z = TopK_k(ReLU((x - b_dec) W_enc + b_enc))     (width numbers, at most k nonzero)
// and decoded as x_hat = z W_dec + b_dec. Fixing k fixes L0 directly, with no L1 penalty to
// tune. The names and shapes are SAELens's: W_enc (d_in, width), W_dec (width, d_in),
// b_enc (width), b_dec (d_in). Each row of W_dec, a feature's direction, is kept at unit
// norm, so a feature's activation is the activation's size along that direction.

#include <cstdint>
#include <vector>

#include <torch/torch.h>

namespace tinylm {

struct SaeShape {
  int64_t d_in = 0;   // the hook point's width
  int64_t width = 0;  // features
  int64_t k = 0;      // features active per activation

  // Throws std::invalid_argument naming what is out of range.
  void validate() const;
};

struct SparseAutoencoder {
  // Decoder rows drawn at random and made unit; the encoder their transpose (Gao et al.'s
  // initialisation: every feature starts reading the direction it writes); biases 0.
  SparseAutoencoder(const SaeShape& shape, at::Generator& generator);
  // From saved weights (float32 copies, requiring grad); throws std::invalid_argument naming
  // the tensor whose shape does not fit `shape`.
  SparseAutoencoder(const SaeShape& shape, const torch::Tensor& W_enc, const torch::Tensor& W_dec,
                    const torch::Tensor& b_enc, const torch::Tensor& b_dec);

  // (..., d_in) -> (..., width), at most k nonzero in each row.
  torch::Tensor encode(const torch::Tensor& x) const;
  // The same code as its k largest entries: values (..., k) >= 0 (a zero one is inactive)
  // and their features' indices (..., k).
  struct SparseCode {
    torch::Tensor values, indices;
  };
  SparseCode encode_sparse(const torch::Tensor& x) const;
  // (..., width) -> (..., d_in).
  torch::Tensor decode(const torch::Tensor& z) const;

  std::vector<torch::Tensor> parameters() const { return {W_enc, W_dec, b_enc, b_dec}; }
  // Rows of W_dec back to unit norm; after every optimizer step.
  void normalize_decoder();

  SaeShape shape;
  torch::Tensor W_enc, W_dec, b_enc, b_dec;  // float32, requiring grad
};

// One optimizer step on a batch (N, d_in): the summed squared reconstruction error, averaged
// over rows, then the decoder renormalised. Returns that loss, before the step, and which
// features fired in the batch.
struct SaeStep {
  double loss = 0.0;
  torch::Tensor fired;  // (width,) bool
};
SaeStep train_sae_step(SparseAutoencoder& sae, torch::optim::Optimizer& optimizer,
                       const torch::Tensor& batch);

}  // namespace tinylm
