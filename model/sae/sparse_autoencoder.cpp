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

SparseAutoencoder::SparseCode SparseAutoencoder::encode_sparse(const torch::Tensor& x) const {
  const torch::Tensor pre = torch::relu(torch::matmul(x - b_dec, W_enc) + b_enc);
  auto [values, indices] = pre.topk(shape.k, -1);
  return {values, indices};
}

SparseAutoencoder::SparseAutoencoder(const SaeShape& s, const torch::Tensor& w_enc,
                                     const torch::Tensor& w_dec, const torch::Tensor& bias_enc,
                                     const torch::Tensor& bias_dec)
    : shape(s) {
  shape.validate();
  const auto take = [](const torch::Tensor& t, const char* name, std::vector<int64_t> expected) {
    if (t.sizes().vec() != expected) {
      throw std::invalid_argument(std::string("the SAE's ") + name + " has shape " +
                                  c10::str(t.sizes()) + ", not " + c10::str(c10::IntArrayRef(expected)));
    }
    return t.detach().to(torch::kFloat32).clone().set_requires_grad(true);
  };
  W_enc = take(w_enc, "W_enc", {shape.d_in, shape.width});
  W_dec = take(w_dec, "W_dec", {shape.width, shape.d_in});
  b_enc = take(bias_enc, "b_enc", {shape.width});
  b_dec = take(bias_dec, "b_dec", {shape.d_in});
}

torch::Tensor SparseAutoencoder::encode(const torch::Tensor& x) const {
  const SparseCode code = encode_sparse(x);
  std::vector<int64_t> sizes = code.values.sizes().vec();
  sizes.back() = shape.width;
  return torch::zeros(sizes, code.values.options()).scatter(-1, code.indices, code.values);
}

torch::Tensor SparseAutoencoder::decode(const torch::Tensor& z) const {
  return torch::matmul(z, W_dec) + b_dec;
}

void SparseAutoencoder::normalize_decoder() {
  const torch::NoGradGuard no_grad;
  W_dec.div_(W_dec.norm(2, 1, true).clamp_min(1e-12));
}

SaeStep train_sae_step(SparseAutoencoder& sae, torch::optim::Optimizer& optimizer,
                       const torch::Tensor& batch) {
  optimizer.zero_grad();
  const SparseAutoencoder::SparseCode code = sae.encode_sparse(batch);
  const torch::Tensor z = torch::zeros({batch.size(0), sae.shape.width}, code.values.options())
                              .scatter(-1, code.indices, code.values);
  const torch::Tensor error = sae.decode(z) - batch;
  const torch::Tensor loss = error.square().sum(-1).mean();
  loss.backward();
  optimizer.step();
  sae.normalize_decoder();
  torch::Tensor fired = torch::zeros({sae.shape.width}, torch::kBool);
  {
    const torch::NoGradGuard no_grad;
    fired.index_fill_(0, code.indices.masked_select(code.values > 0), true);
  }
  return {loss.item<double>(), fired};
}

}  // namespace tinylm
