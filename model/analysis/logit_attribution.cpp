#include "model/analysis/logit_attribution.h"

#include <limits>
#include <stdexcept>

#include "model/activation_cache.h"
#include "model/scoped_mode.h"

namespace tinylm {

namespace {

void check_tokens(const ModelConfig& c, const torch::Tensor& tokens) {
  if (tokens.dim() != 1 || tokens.size(0) < 2 || tokens.size(0) > c.block_size) {
    throw std::invalid_argument("logit attribution needs 2 to block_size (" +
                                std::to_string(c.block_size) + ") tokens, got " +
                                std::to_string(tokens.numel()));
  }
}

}  // namespace

HookFilter logit_attribution_points() {
  const HookFilter post = names_ending_with("hook_resid_post"),
                   z = names_ending_with("attn.hook_z"), mlp = names_ending_with("hook_mlp_out");
  return [=](const std::string& name) {
    return name == "blocks.0.hook_resid_pre" || post(name) || z(name) || mlp(name);
  };
}

LogitAttribution logit_attribution(GPT& model, const torch::Tensor& tokens) {
  check_tokens(model->config(), tokens);
  const ScopedMode eval = eval_mode(*model);
  return logit_attribution(
      model,
      run_with_cache(model, tokens.to(torch::kInt64).unsqueeze(0), logit_attribution_points()),
      tokens);
}

LogitAttribution logit_attribution(GPT& model, const CachedRun& run, const torch::Tensor& tokens) {
  const ModelConfig& c = model->config();
  check_tokens(c, tokens);
  if (run.logits.size(0) != 1 || run.logits.size(1) != tokens.size(0))
    throw std::invalid_argument("logit attribution: the cached pass is not over these tokens");
  const int64_t L = c.n_layer, nh = c.n_head, hs = c.head_size(), T = tokens.size(0);
  torch::NoGradGuard no_grad;
  const auto f64 = [](const torch::Tensor& t) { return t.to(torch::kFloat64); };

  LogitAttribution a;
  a.targets = tokens.slice(0, 1).to(torch::kInt64);  // (T - 1,)
  Norm& ln_f = model->transformer->ln_f;
  const torch::Tensor x =
      f64(run.cache.at(hook_name(L - 1, "hook_resid_post"))[0]).slice(0, 0, T - 1);
  const torch::Tensor s = ln_f->scale(x);  // (T - 1, 1)
  // Each position's reading direction g * u_y / s: a part p adds (C p) . direction.
  const torch::Tensor direction =
      f64(ln_f->weight) * f64(model->unembedding()).index_select(0, a.targets) / s;  // (T - 1, C)
  const auto logit_of = [&](const torch::Tensor& part) {  // part (T - 1, C) -> (T - 1,)
    const torch::Tensor centred = ln_f->centres() ? part - part.mean(-1, true) : part;
    return (centred * direction).sum(-1);
  };

  a.embed = logit_of(f64(run.cache.at(hook_name(0, "hook_resid_pre"))[0]).slice(0, 0, T - 1));
  a.heads = torch::zeros({T - 1, L, nh}, torch::kFloat64);
  a.mlps = torch::full({T - 1, L}, std::numeric_limits<double>::quiet_NaN(), torch::kFloat64);
  a.biases = ln_f->bias.defined()
                 ? (f64(ln_f->bias) * f64(model->unembedding()).index_select(0, a.targets)).sum(-1)
                 : torch::zeros({T - 1}, torch::kFloat64);
  for (int64_t l = 0; l < L; ++l) {
    Block& block = model->transformer->h[l];
    const torch::Tensor z = f64(run.cache.at(hook_name(l, "attn.hook_z"))[0]);  // (nh, T, hs)
    const torch::Tensor w_o = f64(block->attn->c_proj->weight);                 // (C, C)
    for (int64_t h = 0; h < nh; ++h) {
      const torch::Tensor out =
          z[h].slice(0, 0, T - 1).matmul(w_o.slice(1, h * hs, (h + 1) * hs).t());
      a.heads.select(2, h).select(1, l).copy_(logit_of(out));
    }
    if (block->attn->c_proj->bias.defined())
      a.biases += logit_of(f64(block->attn->c_proj->bias).expand({T - 1, c.n_embd}));
    const std::string mlp = hook_name(l, "hook_mlp_out");
    if (run.cache.contains(mlp))
      a.mlps.select(1, l).copy_(logit_of(f64(run.cache.at(mlp)[0]).slice(0, 0, T - 1)));
  }
  a.logits = f64(run.logits[0]).slice(0, 0, T - 1).gather(1, a.targets.unsqueeze(1)).squeeze(1);
  return a;
}

}  // namespace tinylm
