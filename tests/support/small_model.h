#pragma once
// The tests' one builder of small models. A config is the base below changed by model keys
// as a config file spells them, read through the same declarations (model/config_key.h):
//   GPT model = random_model(small_config({"pos_encoding=rope", "n_kv_head=1"}));

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "model/gpt.h"
#include "test_util.h"
#include "train/run/run_config.h"

namespace tinylm::test {

// n_layer 2, n_head 2, n_embd 16, block_size 8, vocab 11, then `changes` ("key=value",
// model keys) in order. Throws on a bad key or value, as a config file would.
inline ModelConfig small_config(const std::vector<std::string>& changes = {},
                                int64_t vocab_size = 11) {
  RunConfig run;
  run.data.path = "unused";
  run.model.n_layer = 2;
  run.model.n_head = 2;
  run.model.n_embd = 16;
  run.model.block_size = 8;
  std::vector<std::string> overrides;
  for (const std::string& change : changes) overrides.push_back("model." + change);
  apply_overrides(run, overrides);
  run.model.vocab_size = vocab_size;
  run.model.validate();
  return run.model;
}

// One layer of one head, 8 wide, for analyses whose every number can be worked out.
inline ModelConfig one_head_config(int64_t block_size, int64_t vocab_size) {
  return small_config(
      {"n_layer=1", "n_head=1", "n_embd=8", "block_size=" + std::to_string(block_size)},
      vocab_size);
}

// A batch of token ids (B 2, T 6), all < 11, for models of small_config's vocabulary.
inline torch::Tensor some_tokens() {
  return torch::tensor({{1, 5, 2, 9, 5, 0}, {3, 3, 7, 10, 4, 1}}, torch::kInt64);  // (B, T)
}

// Every parameter random (biases and norm weights too), in eval mode, so that no term of a
// computation hides behind a zero or a one.
inline GPT random_model(const ModelConfig& config, uint64_t seed = 3) {
  GPT model(config);
  auto rng = at::make_generator<at::CPUGeneratorImpl>(seed);
  torch::NoGradGuard no_grad;
  for (auto& p : model->parameters()) p.normal_(0.0, 0.3, rng);
  model->eval();
  return model;
}

// GPT-2's init (GPTImpl::init_weights), in eval mode.
inline GPT initialised_model(const ModelConfig& config, uint64_t seed = 7) {
  GPT model(config);
  auto rng = at::make_generator<at::CPUGeneratorImpl>(seed);
  model->init_weights(rng);
  model->eval();
  return model;
}

}  // namespace tinylm::test
