#include "model/analysis/logit_lens.h"

#include "model/activation_cache.h"
#include "model/scoped_mode.h"

namespace tinylm {

HookFilter logit_lens_points() {
  return [](const std::string& name) {
    return name == "blocks.0.hook_resid_pre" || name.find("hook_resid_post") != std::string::npos;
  };
}

LogitLens logit_lens(GPT& model, const torch::Tensor& tokens, int64_t k) {
  const ScopedMode eval = eval_mode(*model);
  return logit_lens(model, run_with_cache(model, tokens, logit_lens_points()).cache, tokens, k);
}

LogitLens logit_lens(GPT& model, const ActivationCache& cache, const torch::Tensor& tokens,
                     int64_t k) {
  torch::NoGradGuard no_grad;
  const int64_t L = model->config().n_layer;
  LogitLens lens;
  std::vector<torch::Tensor> residuals = {cache.at("blocks.0.hook_resid_pre")};
  lens.stages.push_back("embed");
  for (int64_t l = 0; l < L; ++l) {
    residuals.push_back(cache.at(hook_name(l, "hook_resid_post")));
    lens.stages.push_back("block " + std::to_string(l));
  }
  const torch::Tensor stream = torch::cat(residuals, 0);  // (L + 1, T, C)
  const torch::Tensor logits = model->transformer->ln_f(stream).matmul(model->unembedding().t());
  const auto top = torch::softmax(logits, -1).topk(std::min(k, logits.size(-1)), -1);
  lens.top_probs = std::get<0>(top);  // (L + 1, T, k)
  lens.top_ids = std::get<1>(top);
  const int64_t T = tokens.size(1);
  lens.loss = -torch::log_softmax(logits[L].slice(0, 0, T - 1).to(torch::kFloat64), -1)
                   .gather(1, tokens[0].slice(0, 1).unsqueeze(1))
                   .squeeze(1);
  return lens;
}

}  // namespace tinylm
