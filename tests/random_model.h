#pragma once
// A GPT whose every parameter is random (biases and LayerNorm too), in eval mode, so that
// no term of a computation hides behind a zero or a one. For the tests of hooks and analyses.

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "model/gpt.h"

namespace tinylm::test {

inline GPT random_model(const ModelConfig& config, uint64_t seed = 3) {
  GPT model(config);
  auto rng = at::make_generator<at::CPUGeneratorImpl>(seed);
  torch::NoGradGuard no_grad;
  for (auto& p : model->parameters()) p.normal_(0.0, 0.3, rng);
  model->eval();
  return model;
}

}  // namespace tinylm::test
