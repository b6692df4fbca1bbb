#include "train/adamw.h"

#include "train/adamw_update.h"
#include "train/muon.h"

#include <ATen/record_function.h>

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace tinylm {

namespace {

// T5's bias table (nh, buckets) is a matrix of biases, not a map: like a bias, neither
// orthogonalised nor decayed (decay would pull it towards no positions at all).
bool is_bias_table(const std::string& name) { return name.find(".rel_bias.") != std::string::npos; }

// The blocks' weight matrices: Muon's under train.optimizer = "muon".
bool muon_takes(const std::string& name, const torch::Tensor& p) {
  return p.dim() == 2 && name.rfind("transformer.h.", 0) == 0 && !is_bias_table(name);
}

// AdamW decays matrices (nanoGPT's rule, embeddings included) and nothing else.
bool decays(const std::string& name, const torch::Tensor& p) {
  return p.dim() >= 2 && !is_bias_table(name);
}

}  // namespace

AdamW::AdamW(GPT& model, const TrainConfig& config)
    : beta1_(config.beta1),
      beta2_(config.beta2),
      weight_decay_(config.weight_decay),
      muon_lr_scale_(config.muon_learning_rate / config.learning_rate),
      muon_momentum_(config.muon_momentum),
      muon_dtype_(config.dtype == Dtype::kBfloat16 ? torch::kBFloat16 : torch::kFloat32) {
  const bool muon = config.optimizer == OptimizerKind::kMuon;
  // Muon's matrices, then AdamW's decayed parameters, then the rest.
  std::vector<std::pair<std::string, torch::Tensor>> ordered;
  for (const int group : {0, 1, 2}) {
    for (const auto& item : model->named_parameters()) {
      const bool m = muon && muon_takes(item.key(), item.value());
      const int g = m ? 0 : decays(item.key(), item.value()) ? 1 : 2;
      if (g == group) ordered.emplace_back(item.key(), item.value());
    }
  }
  // Muon's matrices by shape, so that each layer's matrix of a shape lies next to the other
  // layers' and Newton-Schulz runs on them as one batch.
  const auto muon_count = std::count_if(ordered.begin(), ordered.end(), [&](const auto& item) {
    return muon && muon_takes(item.first, item.second);
  });
  std::stable_sort(ordered.begin(), ordered.begin() + muon_count, [](const auto& x, const auto& y) {
    return x.second.sizes().vec() < y.second.sizes().vec();
  });
  int64_t total = 0;
  for (const auto& [name, p] : ordered) {
    const bool m = muon && muon_takes(name, p);
    slots_.push_back({name, total, p.numel(), p.sizes().vec(), m});
    if (m || decays(name, p)) decayed_ = total + p.numel();
    if (m) muon_end_ = total + p.numel();
    if (m && (muon_batches_.empty() || muon_batches_.back().shape != p.sizes().vec()))
      muon_batches_.push_back({total, 0, p.sizes().vec()});
    if (m) ++muon_batches_.back().count;
    total += p.numel();
  }
  const torch::Device device =
      ordered.empty() ? torch::Device(torch::kCPU) : ordered.front().second.device();
  const auto options = torch::TensorOptions().dtype(torch::kFloat32).device(device);
  params_ = torch::empty({total}, options);
  sync_buffer_ = torch::zeros({total + kSideSlots}, options);
  grads_ = sync_buffer_.narrow(0, 0, total);
  exp_avg_ = torch::zeros({total}, options);
  exp_avg_sq_ = torch::zeros({total}, options);
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < ordered.size(); ++i) {
    torch::Tensor& p = ordered[i].second;
    const Slot& s = slots_[i];
    torch::Tensor view = params_.narrow(0, s.offset, s.numel).view(s.shape);
    view.copy_(p);
    p.set_data(view);
    p.mutable_grad() = grads_.narrow(0, s.offset, s.numel).view(s.shape);
  }
}

double AdamW::clip_grad_norm(double max_norm) {
  RECORD_USER_SCOPE("tinylm::optimizer");  // a profiler's category (train/step_profile.h)
  const double norm = grads_.norm().item<double>();
  if (std::isfinite(max_norm) && norm > max_norm) grads_.mul_(max_norm / (norm + 1e-6));
  return norm;
}

int64_t AdamW::muon_matrices() const {
  return std::count_if(slots_.begin(), slots_.end(), [](const Slot& s) { return s.muon; });
}

double AdamW::newton_schulz_flops() const {
  double flops = 0.0;
  for (const MuonBatch& batch : muon_batches_)  // shape: a matrix's (rows, cols)
    flops += static_cast<double>(batch.count) *
             tinylm::newton_schulz_flops(batch.shape[0], batch.shape[1]);
  return flops;
}

void AdamW::muon_step(double lr) {
  std::vector<MuonMatrices> batches;
  for (const MuonBatch& batch : muon_batches_) {
    std::vector<int64_t> shape{batch.count};
    shape.insert(shape.end(), batch.shape.begin(), batch.shape.end());
    const auto view = [&](const torch::Tensor& flat) {
      return flat.narrow(0, batch.offset, c10::multiply_integers(shape)).view(shape);
    };
    batches.push_back({view(params_), view(grads_), view(exp_avg_)});
  }
  muon_update(batches, lr * muon_lr_scale_, muon_momentum_, 1.0 - lr * weight_decay_, muon_dtype_);
}

void AdamW::step(double lr) {
  RECORD_USER_SCOPE("tinylm::optimizer");
  if (!params_.is_cpu()) return step_with_operators(lr);
  muon_step(lr);
  ++steps_;
  AdamWScalars s;
  s.beta1 = static_cast<float>(beta1_);
  s.beta2 = static_cast<float>(beta2_);
  s.step_size = static_cast<float>(lr / (1.0 - std::pow(beta1_, steps_)));
  s.root_correction2 = static_cast<float>(std::sqrt(1.0 - std::pow(beta2_, steps_)));
  s.eps = static_cast<float>(eps_);
  s.decay = static_cast<float>(1.0 - lr * weight_decay_);
  float* p = params_.data_ptr<float>();
  const float* g = grads_.data_ptr<float>();
  float* m = exp_avg_.data_ptr<float>();
  float* v = exp_avg_sq_.data_ptr<float>();
  const int64_t decayed = decayed_;
  at::parallel_for(muon_end_, params_.numel(), 16384, [&](int64_t begin, int64_t end) {
    adamw_update(p, g, m, v, begin, end, decayed, s);
  });
}

void AdamW::step_with_operators(double lr) {
  muon_step(lr);
  ++steps_;
  const double step_size = lr / (1.0 - std::pow(beta1_, steps_));
  const double root_correction2 = std::sqrt(1.0 - std::pow(beta2_, steps_));
  torch::NoGradGuard no_grad;
  const int64_t n = params_.numel() - muon_end_;  // AdamW's part
  const auto part = [&](torch::Tensor& flat) { return flat.narrow(0, muon_end_, n); };
  torch::Tensor p = part(params_), g = part(grads_), m = part(exp_avg_), v = part(exp_avg_sq_);
  p.narrow(0, 0, decayed_ - muon_end_).mul_(static_cast<float>(1.0 - lr * weight_decay_));
  m.mul_(beta1_).add_(g, 1.0 - beta1_);
  v.mul_(beta2_).addcmul_(g, g, 1.0 - beta2_);
  const torch::Tensor denominator = (v.sqrt() / root_correction2).add_(eps_);
  p.addcdiv_(m, denominator, -step_size);
}

NamedTensors AdamW::moments() const {
  NamedTensors out;
  for (const Slot& s : slots_) {
    const auto view = [&](const torch::Tensor& flat) {
      return flat.narrow(0, s.offset, s.numel).view(s.shape);
    };
    if (s.muon) {
      out.emplace_back("muon_momentum." + s.name, view(exp_avg_));
      continue;
    }
    out.emplace_back("exp_avg." + s.name, view(exp_avg_));
    out.emplace_back("exp_avg_sq." + s.name, view(exp_avg_sq_));
  }
  return out;
}

void AdamW::restore(const std::map<std::string, torch::Tensor>& moments, int64_t steps,
                    const std::string& source) {
  exp_avg_.zero_(), exp_avg_sq_.zero_();
  steps_ = steps;
  if (steps == 0) return;
  using Moment = std::pair<const char*, torch::Tensor*>;
  for (const Slot& s : slots_) {
    const std::vector<Moment> wanted =
        s.muon ? std::vector<Moment>{{"muon_momentum.", &exp_avg_}}
               : std::vector<Moment>{{"exp_avg.", &exp_avg_}, {"exp_avg_sq.", &exp_avg_sq_}};
    for (const auto& [prefix, buffer] : wanted) {
      const auto it = moments.find(prefix + s.name);
      if (it == moments.end() || it->second.sizes().vec() != s.shape) {
        throw std::runtime_error(source + " lacks " + (s.muon ? "Muon momentum" : "AdamW moments") +
                                 " of the right shape for " + s.name +
                                 " (was it trained with another train.optimizer?)");
      }
      buffer->narrow(0, s.offset, s.numel).copy_(it->second.reshape({-1}));
    }
  }
}

}  // namespace tinylm
