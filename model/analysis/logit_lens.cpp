#include "model/analysis/logit_lens.h"

#include "model/activation_cache.h"
#include "model/scoped_mode.h"

namespace tinylm {

LogitLens logit_lens(GPT& model, const torch::Tensor& tokens, int64_t k) {
  torch::NoGradGuard no_grad;
  const int64_t L = model->config().n_layer;
  const ScopedMode eval = eval_mode(*model);
  const CachedRun run = run_with_cache(model, tokens, [](const std::string& name) {
    return name == "blocks.0.hook_resid_pre" || name.find("hook_resid_post") != std::string::npos;
  });
  LogitLens lens;
  std::vector<torch::Tensor> residuals = {run.cache.at("blocks.0.hook_resid_pre")};
  lens.stages.push_back("embed");
  for (int64_t l = 0; l < L; ++l) {
    residuals.push_back(run.cache.at(hook_name(l, "hook_resid_post")));
    lens.stages.push_back("block " + std::to_string(l));
  }
  const torch::Tensor stream = torch::cat(residuals, 0);  // (L + 1, T, C)
  const torch::Tensor logits = model->transformer->ln_f(stream).matmul(model->unembedding().t());
  const auto top = torch::softmax(logits, -1).topk(std::min(k, logits.size(-1)), -1);
  lens.top_probs = std::get<0>(top);  // (L + 1, T, k)
  lens.top_ids = std::get<1>(top);
  return lens;
}

}  // namespace tinylm
