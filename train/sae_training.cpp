#include "train/sae_training.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <type_traits>
#include <vector>

#include "data/batches.h"
#include "train/run/checkpoint.h"

namespace tinylm {

namespace {

using Clock = std::chrono::steady_clock;

const std::vector<std::string> kNames = {"W_enc", "W_dec", "b_enc", "b_dec"};

// The key of a parameter's state in a LibTorch optimizer: its TensorImpl's address, as text
// in some versions of LibTorch and as the pointer itself in others.
template <class Key>
Key key_of(const torch::Tensor& p) {
  if constexpr (std::is_same_v<Key, std::string>) {
    return c10::guts::to_string(p.unsafeGetTensorImpl());
  } else {
    return static_cast<Key>(p.unsafeGetTensorImpl());
  }
}

auto state_key(const torch::Tensor& p) {
  using Key = std::decay_t<decltype(std::declval<torch::optim::Adam&>().state())>::key_type;
  return key_of<Key>(p);
}

NamedTensors adam_moments(torch::optim::Adam& adam, const SparseAutoencoder& sae, int64_t& steps) {
  NamedTensors out;
  const std::vector<torch::Tensor> params = sae.parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    const auto it = adam.state().find(state_key(params[i]));
    if (it == adam.state().end()) continue;
    const auto& s = static_cast<const torch::optim::AdamParamState&>(*it->second);
    out.emplace_back("exp_avg." + kNames[i], s.exp_avg());
    out.emplace_back("exp_avg_sq." + kNames[i], s.exp_avg_sq());
    steps = s.step();
  }
  return out;
}

void restore_adam(torch::optim::Adam& adam, const SparseAutoencoder& sae, const SaeProgress& p) {
  if (p.moments.empty()) return;
  const auto find = [&](const std::string& name) {
    for (const auto& [n, t] : p.moments)
      if (n == name) return t;
    throw std::runtime_error("the SAE's training state has no " + name);
  };
  const std::vector<torch::Tensor> params = sae.parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    auto s = std::make_unique<torch::optim::AdamParamState>();
    s->step(p.adam_steps);
    s->exp_avg(find("exp_avg." + kNames[i]).clone());
    s->exp_avg_sq(find("exp_avg_sq." + kNames[i]).clone());
    adam.state()[state_key(params[i])] = std::move(s);
  }
}

}  // namespace

nlohmann::json SaeTrainingOptions::to_json() const {
  return {{"tokens", tokens},   {"batch", batch},
          {"lr", lr},           {"windows_per_pass", windows_per_pass},
          {"buffer_passes", buffer_passes}, {"dead_tokens", dead_tokens},
          {"seed", seed}};
}

SaeTrainingOptions SaeTrainingOptions::from_json(const nlohmann::json& doc, int64_t tokens) {
  SaeTrainingOptions o;
  o.tokens = tokens;
  o.batch = doc.at("batch").get<int64_t>();
  o.lr = doc.at("lr").get<double>();
  o.windows_per_pass = doc.at("windows_per_pass").get<int64_t>();
  o.buffer_passes = doc.at("buffer_passes").get<int64_t>();
  o.dead_tokens = doc.at("dead_tokens").get<int64_t>();
  o.seed = doc.at("seed").get<uint64_t>();
  return o;
}

double dead_fraction(const SaeProgress& p, int64_t dead_tokens) {
  const int64_t since = std::max<int64_t>(0, p.tokens_done - dead_tokens);
  // Fired at or after `since` (last_fired records tokens_done after the step it fired in).
  const int64_t alive = (p.last_fired > since).sum().item<int64_t>();
  return 1.0 - static_cast<double>(alive) / static_cast<double>(p.last_fired.size(0));
}

bool train_sae(GPT& model, const HookRows& hook, const TokenSequence& tokens, int64_t block_size,
               SparseAutoencoder& sae, SaeProgress& p, const SaeTrainingOptions& o,
               const SaeTrainingHooks& hooks) {
  torch::Generator generator = at::make_generator<at::CPUGeneratorImpl>(o.seed);
  if (!p.rng.empty()) set_generator_state(generator, p.rng, "the SAE's training state");
  if (!p.last_fired.defined()) p.last_fired = torch::full({sae.shape.width}, int64_t{-1}, torch::kInt64);
  p.options = o.to_json();
  const BatchSampler sampler(tokens, block_size, o.windows_per_pass, "train");
  torch::optim::Adam adam(sae.parameters(), torch::optim::AdamOptions(o.lr));
  restore_adam(adam, sae, p);

  const auto save = [&] {
    if (!hooks.checkpoint) return;
    p.rng = generator_state(generator);
    p.moments = adam_moments(adam, sae, p.adam_steps);
    hooks.checkpoint(sae, p);
  };
  auto started = Clock::now(), last_save = started;
  const double seconds_before = p.seconds;
  const int64_t tokens_before = p.tokens_done;
  while (p.tokens_done < p.tokens_total) {
    std::vector<torch::Tensor> passes;
    for (int64_t i = 0; i < o.buffer_passes; ++i) passes.push_back(hook.collect(sampler.sample(generator).first));
    const torch::Tensor buffer = torch::cat(passes);
    if (p.tokens_done == 0) {
      const torch::NoGradGuard no_grad;
      sae.b_dec.copy_(buffer.mean(0));
    }
    const torch::Tensor order = torch::randperm(buffer.size(0), generator);
    for (int64_t first = 0; first < buffer.size(0) && p.tokens_done < p.tokens_total; first += o.batch) {
      const int64_t rows = std::min({o.batch, buffer.size(0) - first, p.tokens_total - p.tokens_done});
      const SaeStep step = train_sae_step(sae, adam, buffer.index_select(0, order.slice(0, first, first + rows)));
      p.tokens_done += rows;
      ++p.steps;
      p.last_fired.masked_fill_(step.fired, p.tokens_done);
      const double elapsed = std::chrono::duration<double>(Clock::now() - started).count();
      p.seconds = seconds_before + elapsed;
      if (hooks.step) {
        hooks.step(p, step.loss, static_cast<double>(p.tokens_done - tokens_before) / std::max(elapsed, 1e-9));
      }
      if (hooks.stop_requested && hooks.stop_requested->load()) {
        save();
        return false;
      }
      if (std::chrono::duration<double>(Clock::now() - last_save).count() >= hooks.checkpoint_seconds) {
        save();
        last_save = Clock::now();
      }
    }
  }
  save();
  return true;
}

}  // namespace tinylm
