#include "model/sae/sparse_autoencoder.h"

#include <stdexcept>
#include <string>

namespace tinylm {

void SaeShape::validate() const {
  if (d_in < 1) throw std::invalid_argument("the SAE's input width must be >= 1 (got " +
                                            std::to_string(d_in) + ")");
  if (width < 1)
    throw std::invalid_argument("the SAE's width must be >= 1 (got " + std::to_string(width) + ")");
  if (k < 1 || k > width) {
    throw std::invalid_argument("the SAE's k must be in [1, width = " + std::to_string(width) +
                                "] (got " + std::to_string(k) + ")");
  }
}

SparseAutoencoder::SparseAutoencoder(const SaeShape& s, at::Generator& generator) : shape(s) {
  shape.validate();
  const torch::NoGradGuard no_grad;
  W_dec = at::normal(0.0, 1.0, {shape.width, shape.d_in}, generator);
  W_dec = W_dec / W_dec.norm(2, 1, true);
  W_enc = W_dec.t().contiguous();
  b_enc = torch::zeros({shape.width});
  b_dec = torch::zeros({shape.d_in});
  for (torch::Tensor* p : {&W_enc, &W_dec, &b_enc, &b_dec}) p->set_requires_grad(true);
}

torch::Tensor SparseAutoencoder::encode(const torch::Tensor& x) const {
  const torch::Tensor pre = torch::relu(torch::matmul(x - b_dec, W_enc) + b_enc);
  const auto [values, indices] = pre.topk(shape.k, -1);
  return torch::zeros_like(pre).scatter(-1, indices, values);
}

torch::Tensor SparseAutoencoder::decode(const torch::Tensor& z) const {
  return torch::matmul(z, W_dec) + b_dec;
}

void SparseAutoencoder::normalize_decoder() {
  const torch::NoGradGuard no_grad;
  W_dec.div_(W_dec.norm(2, 1, true).clamp_min(1e-12));
}

double train_sae_step(SparseAutoencoder& sae, torch::optim::Optimizer& optimizer,
                      const torch::Tensor& batch) {
  optimizer.zero_grad();
  const torch::Tensor error = sae.decode(sae.encode(batch)) - batch;
  const torch::Tensor loss = error.square().sum(-1).mean();
  loss.backward();
  optimizer.step();
  sae.normalize_decoder();
  return loss.item<double>();
}

}  // namespace tinylm
