#include "train/train_step.h"

#include <ATen/autocast_mode.h>

#include <limits>

#include "train/evaluate.h"

namespace tinylm {
namespace {

// LibTorch's CPU autocast for the scope: matmuls and linears in bfloat16, reductions and
// the loss in float32; weights, gradients and AdamW stay float32.
class Autocast {
 public:
  explicit Autocast(bool on) : on_(on) {
    if (!on_) return;
    at::autocast::set_autocast_cpu_dtype(at::kBFloat16);
    at::autocast::set_cpu_enabled(true);
  }
  ~Autocast() {
    if (!on_) return;
    at::autocast::set_cpu_enabled(false);
    at::autocast::clear_cache();
  }
  Autocast(const Autocast&) = delete;
  Autocast& operator=(const Autocast&) = delete;

 private:
  bool on_;
};

}  // namespace

StepResult train_step(GPT& model, AdamW& optimizer, const TrainConfig& config, double lr,
                      const BatchSource& next_batch) {
  StepResult result;
  const double micro_steps = static_cast<double>(config.gradient_accumulation_steps);
  for (int64_t micro = 0; micro < config.gradient_accumulation_steps; ++micro) {
    const auto [x, y] = next_batch();  // (B, T), (B, T)
    torch::Tensor loss;
    {
      Autocast autocast(config.dtype == "bfloat16");
      loss = next_token_loss(model->forward(x), y).to(torch::kFloat32) / micro_steps;
    }
    loss.backward();
    result.loss += loss.item<double>();
  }
  result.grad_norm = optimizer.clip_grad_norm(
      config.grad_clip > 0.0 ? config.grad_clip : std::numeric_limits<double>::infinity());
  optimizer.step(lr);
  optimizer.zero_grad();
  return result;
}

}  // namespace tinylm
