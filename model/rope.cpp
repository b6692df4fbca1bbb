#include "model/rope.h"

#include <ATen/record_function.h>

#include <cmath>
#include <stdexcept>

namespace tinylm {

namespace {
constexpr double kBase = 10000.0;
}  // namespace

void rope_row(int64_t position, int64_t head_size, float* cos, float* sin) {
  for (int64_t i = 0; i < head_size / 2; ++i) {
    const double theta =
        std::pow(kBase, -2.0 * static_cast<double>(i) / static_cast<double>(head_size));
    const double angle = static_cast<double>(position) * theta;
    cos[i] = static_cast<float>(std::cos(angle));
    sin[i] = static_cast<float>(std::sin(angle));
  }
}

RopeTables rope_tables(int64_t count, int64_t head_size, int64_t first) {
  if (head_size % 2 != 0) throw std::invalid_argument("rotary positions need an even head size");
  const torch::Tensor cos = torch::empty({count, head_size / 2}),
                      sin = torch::empty({count, head_size / 2});
  for (int64_t p = 0; p < count; ++p) {
    rope_row(first + p, head_size, cos[p].data_ptr<float>(), sin[p].data_ptr<float>());
  }
  return {cos, sin, torch::cat({cos, cos}, 1), torch::cat({-sin, sin}, 1)};
}

torch::Tensor apply_rope(const torch::Tensor& x, const RopeTables& tables, int64_t first) {
  RECORD_USER_SCOPE("tinylm::rotary");  // a profiler's category (train/step_profile.h)
  const int64_t T = x.size(-2), half = x.size(-1) / 2;
  torch::Tensor cos, sin;  // (T, hs): cos_full and sin_signed
  if (first + T <= tables.cos.size(0)) {
    cos = tables.cos_full.slice(0, first, first + T);
    sin = tables.sin_signed.slice(0, first, first + T);
  } else {
    const RopeTables beyond = rope_tables(T, x.size(-1), first);
    cos = beyond.cos_full.to(x.device());
    sin = beyond.sin_signed.to(x.device());
  }
  // [x1, x2] -> [x1 cos - x2 sin, x2 cos + x1 sin]
  return x * cos + x.roll(half, -1) * sin;
}

}  // namespace tinylm
