#include "train/adamw_update.h"

#include <cmath>

namespace tinylm {

void adamw_update(float* p, const float* g, float* m, float* v, int64_t begin, int64_t end,
                  int64_t decayed, const AdamWScalars& s) {
  for (int64_t i = begin; i < end; ++i) {
    if (i < decayed) p[i] *= s.decay;
    m[i] = s.beta1 * m[i] + (1.0f - s.beta1) * g[i];
    v[i] = s.beta2 * v[i] + (1.0f - s.beta2) * g[i] * g[i];
    p[i] -= s.step_size * m[i] / (std::sqrt(v[i]) / s.root_correction2 + s.eps);
  }
}

}  // namespace tinylm
