#include "model/sae/hook_rows.h"

#include <optional>
#include <stdexcept>
#include <utility>

namespace tinylm {

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Thrown by collect()'s hook once it has its tensor: the rest of the forward pass is not
// needed. It passes only through the modules' own (serial) code.
struct StopForward {};

}  // namespace

bool HookRows::is(const std::string& suffix) const { return ends_with(hook_, suffix); }

HookRows::HookRows(GPT& model, std::string hook) : model_(&model), hook_(std::move(hook)) {
  model->hook_point(hook_);  // throws, naming the closest name, for one the model lacks
  for (const char* refused : {"hook_scores", "hook_pattern", "hook_pos_embed"}) {
    if (ends_with(hook_, refused)) {
      throw std::invalid_argument(
          "an SAE reads one vector per token, and \"" + hook_ +
          "\" is not one (attention's scores and pattern run over the keys, the position table "
          "has no tokens); try blocks.L.attn.hook_z, blocks.L.hook_resid_post or "
          "blocks.L.hook_mlp_out");
    }
  }
  for (const char* head_major : {"attn.hook_z", "attn.hook_q", "attn.hook_k", "attn.hook_v",
                                 "attn.hook_rot_q", "attn.hook_rot_k"}) {
    per_head_ = per_head_ || ends_with(hook_, head_major);
  }
  if (hook_.rfind("blocks.", 0) == 0) layer_ = std::stoll(hook_.substr(7));
  // The width from the tensor itself: one token through the model.
  const torch::Tensor probe = torch::zeros({1, 1}, torch::dtype(torch::kInt64).device(model->device()));
  const torch::Tensor x = collect(probe);
  width_ = x.size(1);
  if (per_head_) {
    std::optional<int64_t> n;
    const HookHandle handle = model->add_hook(hook_, [&](const torch::Tensor& t, const std::string&) {
      n = t.size(1);
      return t;
    });
    collect(probe);
    heads_ = *n;
  }
}

torch::Tensor HookRows::to_rows(const torch::Tensor& x) const {
  if (per_head_) {  // (B, n, T, hs) -> (B, T, n, hs) -> (B T, n hs)
    return x.transpose(1, 2).reshape({x.size(0) * x.size(2), x.size(1) * x.size(3)});
  }
  return x.reshape({-1, x.size(-1)});
}

torch::Tensor HookRows::from_rows(const torch::Tensor& rows, const torch::Tensor& like) const {
  if (per_head_) {
    const int64_t B = like.size(0), n = like.size(1), T = like.size(2), hs = like.size(3);
    return rows.reshape({B, T, n, hs}).transpose(1, 2);
  }
  return rows.reshape(like.sizes());
}

torch::Tensor HookRows::collect(const torch::Tensor& tokens) const {
  const torch::NoGradGuard no_grad;
  torch::Tensor rows;
  const HookHandle handle = (*model_)->add_hook(hook_, [&](const torch::Tensor& x, const std::string&) -> torch::Tensor {
    rows = to_rows(x).to(torch::kFloat32).contiguous();
    throw StopForward{};
  });
  try {
    (*model_)->forward(tokens);
  } catch (const StopForward&) {
    return rows;
  }
  throw std::logic_error("the forward pass did not reach hook point " + hook_);
}

}  // namespace tinylm
