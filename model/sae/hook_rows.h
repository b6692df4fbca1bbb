#pragma once
// A hook point's tensor as rows of activations, one row per token, and back: what an SAE
// reads and what a splice writes. Two layouts exist among the hook points an SAE can read:
//   tokens: (B, T, X), the stream and the MLP (hook_resid_pre, hook_mlp_out, mlp.hook_post);
//   heads:  (B, n, T, hs), attention's per-head vectors (hook_z, hook_q, hook_k, hook_v),
//           whose row is the heads side by side, (n hs), in c_proj's input order.
// Attention's scores and pattern (their last axis is the keys, not features) and the
// position table (no tokens) are refused.

#include <cstdint>
#include <string>

#include <torch/torch.h>

#include "model/gpt.h"

namespace tinylm {

class HookRows {
 public:
  // Throws std::invalid_argument for a name the model lacks (naming the closest one) or a
  // point whose tensor is not one vector per token.
  HookRows(GPT& model, std::string hook);

  const std::string& hook() const { return hook_; }
  // Whether the name ends with `suffix` ("attn.hook_z"): which kind of point it is.
  bool is(const std::string& suffix) const;
  int64_t layer() const { return layer_; }  // the block it is in; -1 outside the blocks
  bool per_head() const { return per_head_; }
  int64_t width() const { return width_; }  // the numbers in one row (d_in)
  int64_t heads() const { return heads_; }  // per_head: the heads in a row; else 1

  // The hook's tensor -> (B T, width), a view where the layout allows.
  torch::Tensor to_rows(const torch::Tensor& x) const;
  // (B T, width) rows -> a tensor shaped as `like`, the hook's own.
  torch::Tensor from_rows(const torch::Tensor& rows, const torch::Tensor& like) const;

  // The rows of `tokens` (B, T) int64, without gradients, in the model's mode; the forward
  // pass stops at the hook (nothing after it runs). Other hooks attached apply.
  torch::Tensor collect(const torch::Tensor& tokens) const;

 private:
  GPT* model_;
  std::string hook_;
  int64_t layer_ = -1;
  bool per_head_ = false;
  int64_t width_ = 0;
  int64_t heads_ = 1;
};

}  // namespace tinylm
