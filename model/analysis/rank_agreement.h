#pragma once
// How far a cheap estimate ranks things as the exact measurement does: Spearman's rank
// correlation (ties share their mean rank) and the top k that both pick, largest first.
// Attribution patching and attribution-ranked ablation report it beside the exact values.

#include <cstdint>
#include <vector>

namespace tinylm {

struct RankAgreement {
  double spearman = 0.0;      // NaN with fewer than 2 items, or a constant side
  int64_t k = 0;              // the top k compared
  std::vector<int64_t> both;  // indices in both top k, in the exact order
};

// exact and estimate are the same items' values; NaN items are left out.
RankAgreement rank_agreement(const std::vector<double>& exact, const std::vector<double>& estimate,
                             int64_t k);

}  // namespace tinylm
