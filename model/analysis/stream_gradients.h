#pragma once
// The gradient of a scalar objective with respect to what each block writes into the
// residual stream: the first-order (attribution) estimate of what changing a write would do,
// after Nanda's attribution patching. One forward pass with gradients and one backward pass;
// the hooks only read (blocks.L.hook_resid_pre, hook_attn_out, hook_mlp_out), so attention
// and SwiGLU keep their fused kernels and the backward holds no (T, T) scores.
//
// A head's gradient needs no hook inside attention: attn_out = z W_O^T + b, so
//     d objective / d z_h = (d objective / d attn_out) W_O[:, h hs : (h + 1) hs].

#include <cstdint>
#include <functional>
#include <vector>

#include <torch/torch.h>

#include "model/gpt.h"

namespace tinylm {

struct StreamGradients {
  struct Site {
    std::vector<torch::Tensor> value, grad;  // per layer (B, T, C), detached
  };
  Site resid_pre, attn_out;
  Site mlp_out;                  // undefined tensors without an MLP
  std::vector<torch::Tensor> z;  // per layer (B, nh, T, hs), when asked for
  double objective = 0.0;
};

// objective: ln_f's output (B, T, C) -> a scalar. tokens (B, T) int64. Eval mode; the
// model's parameters get no gradient. With `head_outputs` each layer's z is kept too (that
// hook makes attention take its operator path: for short texts).
using StreamObjective = std::function<torch::Tensor(const torch::Tensor& normalized)>;
StreamGradients stream_gradients(GPT& model, const torch::Tensor& tokens,
                                 const StreamObjective& objective, bool head_outputs = false);

// d objective / d z of layer `layer`'s heads from d objective / d attn_out (B, T, C):
// (B, nh, T, hs), as blocks.L.attn.hook_z is laid out.
torch::Tensor head_output_gradient(GPT& model, int64_t layer, const torch::Tensor& attn_out_grad);

}  // namespace tinylm
