#include "model/rope.h"

#include <stdexcept>

namespace tinylm {

RopeTables rope_tables(int64_t block_size, int64_t head_size, double base) {
  if (head_size % 2 != 0) throw std::invalid_argument("rotary positions need an even head size");
  const auto f64 = torch::TensorOptions().dtype(torch::kFloat64);
  const torch::Tensor i = torch::arange(0, head_size / 2, f64);
  const torch::Tensor theta = torch::pow(base, -2.0 * i / static_cast<double>(head_size));  // (hs/2,)
  const torch::Tensor angle = torch::arange(block_size, f64).unsqueeze(1) * theta;           // (T, hs/2)
  return {torch::cos(angle).to(torch::kFloat32), torch::sin(angle).to(torch::kFloat32)};
}

torch::Tensor apply_rope(const torch::Tensor& x, const RopeTables& tables) {
  const int64_t T = x.size(-2), half = x.size(-1) / 2;
  const torch::Tensor cos = tables.cos.slice(0, 0, T), sin = tables.sin.slice(0, 0, T);  // (T, hs/2)
  const torch::Tensor x1 = x.slice(-1, 0, half), x2 = x.slice(-1, half, 2 * half);
  return torch::cat({x1 * cos - x2 * sin, x1 * sin + x2 * cos}, -1);
}

}  // namespace tinylm
