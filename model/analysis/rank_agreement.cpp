#include "model/analysis/rank_agreement.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

namespace tinylm {
namespace {

// Ranks 1..n, ties given their mean rank.
std::vector<double> ranks(const std::vector<double>& v) {
  std::vector<size_t> order(v.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
  std::vector<double> r(v.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && v[order[j + 1]] == v[order[i]]) ++j;
    for (size_t t = i; t <= j; ++t) r[order[t]] = (static_cast<double>(i + j) / 2.0) + 1.0;
    i = j + 1;
  }
  return r;
}

double pearson(const std::vector<double>& a, const std::vector<double>& b) {
  const double n = static_cast<double>(a.size());
  const double ma = std::accumulate(a.begin(), a.end(), 0.0) / n;
  const double mb = std::accumulate(b.begin(), b.end(), 0.0) / n;
  double sab = 0.0, saa = 0.0, sbb = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    sab += (a[i] - ma) * (b[i] - mb);
    saa += (a[i] - ma) * (a[i] - ma);
    sbb += (b[i] - mb) * (b[i] - mb);
  }
  return saa > 0.0 && sbb > 0.0 ? sab / std::sqrt(saa * sbb) : std::nan("");
}

// The indices of the k largest values, largest first.
std::vector<int64_t> top(const std::vector<double>& v, const std::vector<int64_t>& items,
                         int64_t k) {
  std::vector<int64_t> order = items;
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return v[static_cast<size_t>(a)] > v[static_cast<size_t>(b)];
  });
  order.resize(static_cast<size_t>(std::min<int64_t>(k, static_cast<int64_t>(order.size()))));
  return order;
}

}  // namespace

RankAgreement rank_agreement(const std::vector<double>& exact, const std::vector<double>& estimate,
                             int64_t k) {
  if (exact.size() != estimate.size())
    throw std::invalid_argument("rank_agreement: the two sides have different lengths");
  std::vector<int64_t> items;
  std::vector<double> a, b;
  for (size_t i = 0; i < exact.size(); ++i) {
    if (std::isnan(exact[i]) || std::isnan(estimate[i])) continue;
    items.push_back(static_cast<int64_t>(i));
    a.push_back(exact[i]);
    b.push_back(estimate[i]);
  }
  RankAgreement r;
  r.spearman = a.size() >= 2 ? pearson(ranks(a), ranks(b)) : std::nan("");
  r.k = std::min<int64_t>(k, static_cast<int64_t>(items.size()));
  const std::vector<int64_t> by_exact = top(exact, items, r.k),
                             by_estimate = top(estimate, items, r.k);
  for (const int64_t i : by_exact) {
    if (std::find(by_estimate.begin(), by_estimate.end(), i) != by_estimate.end())
      r.both.push_back(i);
  }
  return r;
}

}  // namespace tinylm
