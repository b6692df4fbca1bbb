#pragma once
// Same token, different contexts: every occurrence of one token in a set of windows, as a
// vector at each stage of the residual stream, and how alike those vectors are. Stages: the
// token embedding alone ("embed", the same vector every time: similarity 1), block 0's
// resid_pre (with added positions, the first difference), then each block's resid_post.
//   similarity  the mean cosine similarity over all pairs of occurrences; it falls as the
//               blocks read the context in.
//   baseline    the same mean over the vectors of every position, whatever its token: how
//               alike any two vectors of that stage are (residual streams are anisotropic),
//               the level the token's similarity would fall to if its context were all.
// Both from unit vectors u_i as (|sum u|^2 - n) / (n (n - 1)): O(n), not O(n^2).

#include <cstdint>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "model/gpt.h"

namespace tinylm {

struct ContextDrift {
  int64_t token = 0;
  int64_t occurrences = 0;
  int64_t tokens = 0;  // in the windows
  std::vector<std::string>
      stages;                      // "embed", "blocks.0.hook_resid_pre", "blocks.L.hook_resid_post"
  std::vector<double> similarity;  // per stage
  std::vector<double> baseline;    // per stage
};

// windows (n, T) int64 inputs. Throws std::invalid_argument when `token` occurs fewer than
// twice in them.
ContextDrift context_drift(GPT& model, const torch::Tensor& windows, int64_t token,
                           int64_t batch = 64);

}  // namespace tinylm
