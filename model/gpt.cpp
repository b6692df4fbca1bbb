#include "model/gpt.h"

#include <cmath>
#include <stdexcept>

#include "model/fused_linear.h"

namespace tinylm {

torch::Tensor sinusoidal_positions(int64_t block_size, int64_t n_embd) {
  // Computed in double, stored in float: the table is exact to float rounding.
  const auto f64 = torch::TensorOptions().dtype(torch::kFloat64);
  const torch::Tensor pos = torch::arange(block_size, f64).unsqueeze(1);  // (T, 1)
  const torch::Tensor two_i = torch::arange(0, n_embd, 2, f64);           // (C/2,)
  const torch::Tensor angle = pos / torch::pow(10000.0, two_i / static_cast<double>(n_embd));
  torch::Tensor table = torch::empty({block_size, n_embd}, f64);  // (T, C)
  table.slice(1, 0, n_embd, 2).copy_(torch::sin(angle));
  table.slice(1, 1, n_embd, 2).copy_(torch::cos(angle));
  return table.to(torch::kFloat32);
}

TransformerImpl::TransformerImpl(const ModelConfig& config, const HookScope& scope) {
  wte = register_module("wte", torch::nn::Embedding(config.vocab_size, config.n_embd));
  if (config.positions().learned_table) {
    wpe = register_module("wpe", torch::nn::Embedding(config.block_size, config.n_embd));
  }
  auto blocks = register_module("h", torch::nn::ModuleList());
  for (int64_t i = 0; i < config.n_layer; ++i) {
    h.push_back(Block(config, scope / ("blocks." + std::to_string(i)), i));
    blocks->push_back(h.back());
  }
  ln_f = register_module("ln_f", Norm(config.n_embd, config.bias, config.norm));
}

namespace {

ModelConfig validated(ModelConfig config) {
  config.validate();
  return config;
}

}  // namespace

GPTImpl::GPTImpl(ModelConfig config)
    : config_(validated(std::move(config))),
      transformer(register_module("transformer", Transformer(config_, scope_))) {
  if (!config_.tie_weights) {
    lm_head = register_module("lm_head", Linear(config_.n_embd, config_.vocab_size, false));
  }
  if (config_.positions().adds_table && !config_.positions().learned_table) {
    sinusoid_ =
        register_buffer("sinusoid", sinusoidal_positions(config_.block_size, config_.n_embd));
  }
  for (HookPoint* point : hook_points_) by_name_[point->name()] = point;
}

void GPTImpl::init_weights(torch::Generator& generator) {
  torch::NoGradGuard no_grad;
  const double residual_std =
      config_.init_std / std::sqrt(2.0 * static_cast<double>(config_.n_layer));
  const auto ends_with = [](const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() &&
           s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  for (auto& item : named_parameters()) {
    const std::string& name = item.key();
    torch::Tensor& p = item.value();
    if (ends_with(name, ".bias")) {
      p.zero_();
    } else if (name.find(".ln_") != std::string::npos) {
      p.fill_(1.0);
    } else {
      // Residual projections are scaled so the stream's variance does not grow with depth.
      p.normal_(0.0, ends_with(name, "c_proj.weight") ? residual_std : config_.init_std, generator);
    }
  }
}

torch::Tensor GPTImpl::forward(const torch::Tensor& idx) { return forward_impl(idx, nullptr); }

torch::Tensor GPTImpl::forward(const torch::Tensor& idx, KVCache& cache) {
  return forward_impl(idx, &cache);
}

torch::Tensor GPTImpl::forward_impl(const torch::Tensor& idx, KVCache* cache) {
  const int64_t T = idx.size(1);
  int64_t first = 0;  // the position of idx's first token in the window
  if (cache) {
    if (config_.positions().slides()) cache->make_room(T);
    first = cache->length();
  }
  // Past block_size only without a cache, and only where positions extend: a cache holds
  // block_size positions, the learned table has block_size rows.
  if (first + T > config_.block_size && (cache || !config_.positions().extrapolates)) {
    throw std::invalid_argument(
        "sequence of length " + std::to_string(first + T) + (cache ? " (with the cache)" : "") +
        " is longer than model.block_size " + std::to_string(config_.block_size) +
        (cache ? "" : ", and learned positions have no row past it"));
  }
  const torch::Tensor x = blocks_from(0, embed_at(idx, first), cache);
  if (cache) cache->advance(T);
  return unembed(x);
}

torch::Tensor GPTImpl::embed(const torch::Tensor& idx) {
  if (idx.size(1) > config_.block_size && !config_.positions().extrapolates) {
    throw std::invalid_argument(
        "sequence of length " + std::to_string(idx.size(1)) + " is longer than model.block_size " +
        std::to_string(config_.block_size) + ", and learned positions have no row past it");
  }
  return embed_at(idx, 0);
}

torch::Tensor GPTImpl::embed_at(const torch::Tensor& idx, int64_t first) {
  torch::Tensor x = transformer->wte(idx);  // (B, T, C)
  if (const double scale = config_.positions().token_scale(config_.n_embd); scale != 1.0) {
    x = x * scale;
  }
  x = hook_embed_(x);
  if (const torch::Tensor p = positions(first + idx.size(1)); p.defined()) {
    x = x + hook_pos_embed_(p.slice(0, first));  // (T, C) over B
  }
  if (is_training() && config_.dropout > 0.0) x = torch::dropout(x, config_.dropout, true);
  return x;
}

torch::Tensor GPTImpl::forward_from(int64_t layer, const torch::Tensor& x) {
  if (layer < 0 || layer >= config_.n_layer) {
    throw std::invalid_argument("forward_from: layer " + std::to_string(layer) +
                                " is not in this model's 0-" + std::to_string(config_.n_layer - 1));
  }
  return blocks_from(layer, x, nullptr);
}

torch::Tensor GPTImpl::blocks_from(int64_t layer, torch::Tensor x, KVCache* cache) {
  for (size_t l = static_cast<size_t>(layer); l < transformer->h.size(); ++l)
    x = transformer->h[l](x, cache);
  return hook_normalized_(transformer->ln_f(x));  // (B, T, C)
}

torch::Tensor GPTImpl::unembed(const torch::Tensor& normalized) const {
  const torch::Tensor& w = unembedding();  // (V, C)
  // The same product as the linears' (fused_linear.h).
  if (bfloat16_linear_takes(normalized, w)) return bfloat16_linear(normalized, w, {});
  if (float32_linear_takes(normalized, w)) return float32_linear(normalized, w, {});
  return torch::matmul(normalized, w.t());  // (..., V)
}

torch::Tensor GPTImpl::positions(int64_t T) const {
  if (transformer->wpe) return transformer->wpe->weight.slice(0, 0, T);
  if (!sinusoid_.defined()) return {};
  if (T <= sinusoid_.size(0)) return sinusoid_.slice(0, 0, T);
  return sinusoidal_positions(T, config_.n_embd).to(sinusoid_.device());  // past block_size
}

const torch::Tensor& GPTImpl::unembedding() const {
  return lm_head ? lm_head->weight : transformer->wte->weight;
}

std::vector<std::string> GPTImpl::hook_names() const {
  std::vector<std::string> names;
  for (const HookPoint* point : hook_points_) names.push_back(point->name());
  return names;
}

bool GPTImpl::has_hooks() const {
  for (const HookPoint* point : hook_points_) {
    if (point->has_hooks()) return true;
  }
  return false;
}

HookPoint& GPTImpl::hook_point(const std::string& name) {
  const auto it = by_name_.find(name);
  if (it != by_name_.end()) return *it->second;
  // Name the nearest valid one: the longest common prefix, then the shortest name.
  std::string best;
  size_t best_prefix = 0;
  for (const auto& [candidate, point] : by_name_) {
    size_t n = 0;
    while (n < name.size() && n < candidate.size() && name[n] == candidate[n]) ++n;
    if (n > best_prefix || (n == best_prefix && n > 0 && candidate.size() < best.size())) {
      best_prefix = n;
      best = candidate;
    }
  }
  throw std::invalid_argument("no hook point named \"" + name + "\" in this model" +
                              (best.empty() ? "" : "; did you mean \"" + best + "\"?") + " (" +
                              std::to_string(by_name_.size()) + " hook points, e.g. " +
                              hook_points_.front()->name() + ", blocks.0.attn.hook_pattern)");
}

int64_t GPTImpl::num_parameters() const {
  int64_t n = 0;
  for (const auto& p : parameters()) n += p.numel();
  return n;
}

}  // namespace tinylm
