#include "train/adamw_update.h"

#include <cmath>

namespace tinylm {

void adamw_update(float* p, const float* g, float* m, float* v, int64_t begin, int64_t end,
                  int64_t decayed, const AdamWScalars& s) {
  // Locals, not s's fields: a float store through p, m or v may alias a float field, which
  // would make the compiler reload every field after every store.
  const float b1 = s.beta1, b2 = s.beta2, step_size = s.step_size;
  const float root_correction2 = s.root_correction2, eps = s.eps, decay = s.decay;
  for (int64_t i = begin; i < end; ++i) {
    if (i < decayed) p[i] *= decay;
    m[i] = b1 * m[i] + (1.0f - b1) * g[i];
    v[i] = b2 * v[i] + (1.0f - b2) * g[i] * g[i];
    p[i] -= step_size * m[i] / (std::sqrt(v[i]) / root_correction2 + eps);
  }
}

}  // namespace tinylm
