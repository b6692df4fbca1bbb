#include "model/rope.h"

#include <stdexcept>

namespace tinylm {

namespace {
constexpr double kBase = 10000.0;
}  // namespace

RopeTables rope_tables(int64_t count, int64_t head_size, int64_t first) {
  if (head_size % 2 != 0) throw std::invalid_argument("rotary positions need an even head size");
  const auto f64 = torch::TensorOptions().dtype(torch::kFloat64);
  const torch::Tensor i = torch::arange(0, head_size / 2, f64);
  const torch::Tensor theta = torch::pow(kBase, -2.0 * i / static_cast<double>(head_size));  // (hs/2,)
  const torch::Tensor angle = torch::arange(first, first + count, f64).unsqueeze(1) * theta;  // (T, hs/2)
  const torch::Tensor cos = torch::cos(angle).to(torch::kFloat32), sin = torch::sin(angle).to(torch::kFloat32);
  return {cos, sin, torch::cat({cos, cos}, 1), torch::cat({-sin, sin}, 1)};
}

torch::Tensor apply_rope(const torch::Tensor& x, const RopeTables& tables, int64_t first) {
  const int64_t T = x.size(-2), half = x.size(-1) / 2;
  torch::Tensor cos, sin;  // (T, hs): cos_full and sin_signed
  if (first + T <= tables.cos.size(0)) {
    cos = tables.cos_full.slice(0, first, first + T), sin = tables.sin_signed.slice(0, first, first + T);
  } else {
    const RopeTables beyond = rope_tables(T, x.size(-1), first);
    cos = beyond.cos_full.to(x.device()), sin = beyond.sin_signed.to(x.device());
  }
  // [x1, x2] -> [x1 cos - x2 sin, x2 cos + x1 sin]
  return x * cos + x.roll(half, -1) * sin;
}

}  // namespace tinylm
