#include "model/analysis/stream_gradients.h"

#include <string>

#include "model/scoped_mode.h"

namespace tinylm {

StreamGradients stream_gradients(GPT& model, const torch::Tensor& tokens,
                                 const StreamObjective& objective, bool head_outputs) {
  const int64_t L = model->config().n_layer;
  const ScopedMode eval = eval_mode(*model);
  torch::AutoGradMode with_gradients(true);
  StreamGradients out;
  std::vector<torch::Tensor> seen;  // resid_pre, attn_out[, mlp_out] per layer, in order
  std::vector<HookHandle> reads;
  const auto keep = [&seen](const torch::Tensor& x, const std::string&) {
    seen.push_back(x);
    return x;
  };
  const bool mlp = !model->config().attn_only;
  for (int64_t l = 0; l < L; ++l) {
    reads.push_back(model->add_hook(hook_name(l, "hook_resid_pre"), keep));
    reads.push_back(model->add_hook(hook_name(l, "hook_attn_out"), keep));
    if (mlp) reads.push_back(model->add_hook(hook_name(l, "hook_mlp_out"), keep));
    if (head_outputs) {
      reads.push_back(model->add_hook(hook_name(l, "attn.hook_z"),
                                      [&out](const torch::Tensor& z, const std::string&) {
                                        out.z.push_back(z.detach());
                                        return z;
                                      }));
    }
  }
  const torch::Tensor value = objective(model->forward_from(0, model->embed(tokens)));
  reads.clear();
  out.objective = value.item<double>();
  // A write the objective does not reach (past its positions, say) has a zero gradient.
  const std::vector<torch::Tensor> grads =
      torch::autograd::grad({value}, seen, {}, /*retain_graph=*/false, /*create_graph=*/false,
                            /*allow_unused=*/true);
  const size_t per_layer = mlp ? 3 : 2;
  for (size_t i = 0; i < grads.size(); ++i) {
    StreamGradients::Site& site = i % per_layer == 0   ? out.resid_pre
                                  : i % per_layer == 1 ? out.attn_out
                                                       : out.mlp_out;
    site.value.push_back(seen[i].detach());
    site.grad.push_back(grads[i].defined() ? grads[i] : torch::zeros_like(seen[i]));
  }
  if (!mlp) {
    out.mlp_out.value.resize(static_cast<size_t>(L));
    out.mlp_out.grad.resize(static_cast<size_t>(L));
  }
  return out;
}

torch::Tensor head_output_gradient(GPT& model, int64_t layer, const torch::Tensor& attn_out_grad) {
  const ModelConfig& c = model->config();
  const int64_t nh = c.n_head, hs = c.n_embd / c.n_head;
  const torch::Tensor& w_o =
      model->transformer->h[static_cast<size_t>(layer)]->attn->c_proj->weight;
  const torch::Tensor g = torch::matmul(attn_out_grad, w_o.to(attn_out_grad.dtype()));  // (B, T, C)
  return g.view({g.size(0), g.size(1), nh, hs}).permute({0, 2, 1, 3});  // (B, nh, T, hs)
}

}  // namespace tinylm
