#pragma once
// The normalisation before attention, before the MLP and before the unembedding (ln_1, ln_2,
// ln_f, names kept whatever the kind):
//   layernorm  (x - mean) / sqrt(var + eps) * weight + bias   (bias only with model.bias)
//   rmsnorm    x / sqrt(mean(x^2) + eps) * weight              (never a bias; LLaMA's)
// eps = 1e-5 for both, as in PyTorch's LayerNorm and nanoGPT. Both take the fused kernels
// (model/kernels/row_norm.h) where they can.

#include <ATen/record_function.h>
#include <torch/torch.h>

#include "model/autocast_state.h"
#include "model/config.h"
#include "model/kernels/kernel_choice.h"
#include "model/kernels/row_norm.h"

namespace tinylm {

class NormImpl : public torch::nn::Module {
 public:
  NormImpl(int64_t n_embd, bool bias, NormKind kind) : kind_(kind) {
    weight = register_parameter("weight", torch::ones({n_embd}));
    if (bias && kind_ == NormKind::kLayerNorm)
      this->bias = register_parameter("bias", torch::zeros({n_embd}));
  }
  torch::Tensor forward(const torch::Tensor& x) { return normalize(x, false); }  // (..., C)
  // forward(x) for a linear to read (ln_1's and ln_2's): under bfloat16 autocast, which
  // would cast it, the fused kernel writes it in bfloat16 itself, without the copy.
  torch::Tensor forward_to_linear(const torch::Tensor& x) {
    return normalize(x, cpu_autocast_to_bfloat16());
  }
  // Whether the output is centred (mean 0 before the weight): layernorm yes, rmsnorm no.
  bool centres() const { return kind_ == NormKind::kLayerNorm; }
  // What each row of x is divided by, (..., 1): sqrt(var + eps), or sqrt(mean(x^2) + eps).
  // Held fixed, it makes the norm linear in x (direct logit attribution).
  torch::Tensor scale(const torch::Tensor& x) const {
    const torch::Tensor centred = centres() ? x - x.mean(-1, true) : x;
    return torch::sqrt(centred.square().mean(-1, true) + kEps);
  }

  torch::Tensor weight;
  torch::Tensor bias;  // undefined without a bias

 private:
  torch::Tensor normalize(const torch::Tensor& x, bool bfloat16_out) {
    RECORD_USER_SCOPE("tinylm::norm");  // a profiler's category (train/step_profile.h)
    if (kind_ == NormKind::kRmsNorm) {
      if (fused_kernel_takes(x)) return fused_rms_norm(x, weight, kEps, bfloat16_out);
      return x * torch::rsqrt(x.square().mean(-1, true) + kEps) * weight;
    }
    if (fused_kernel_takes(x)) return fused_layer_norm(x, weight, bias, kEps, bfloat16_out);
    return torch::layer_norm(x, {weight.size(0)}, weight, bias, kEps);
  }

  static constexpr double kEps = 1e-5;
  NormKind kind_;
};
TORCH_MODULE(Norm);

}  // namespace tinylm
