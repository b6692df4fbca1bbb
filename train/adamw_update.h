#pragma once
// AdamW's update of a range of flat float32 buffers (train/adamw.h), in a file of its own
// without Torch: it is compiled with -fno-math-errno, which lets GCC vectorise the square
// root (v >= 0 always, so errno is never set), and a file that includes no Torch compiles in
// a second where one with Torch but without the shared precompiled header takes 25.

#include <cstdint>

namespace tinylm {

struct AdamWScalars {
  float beta1, beta2;
  float step_size;         // lr / (1 - beta1^t)
  float root_correction2;  // sqrt(1 - beta2^t)
  float eps;
  float decay;  // 1 - lr * weight_decay, applied to elements [0, decayed)
};

// Elements [begin, end) of the parameters p, gradients g and moments m, v.
void adamw_update(float* p, const float* g, float* m, float* v, int64_t begin, int64_t end,
                  int64_t decayed, const AdamWScalars& s);

}  // namespace tinylm
