#include "model/generate.h"

#include <limits>
#include <stdexcept>

#include "model/ops/decode_step.h"
#include "model/scoped_mode.h"

namespace tinylm {
namespace {

// One step of generation: the logits after the last block_size of tokens[:, :length], with
// or without the cache.
class Stepper {
 public:
  Stepper(GPT& model, bool use_cache)
      : model_(model), use_cache_(use_cache), cache_(model->make_cache()) {}

  // Logits (B, V) for the position after tokens[:, :length], where the tokens before the
  // last `fresh` ones were seen by earlier calls. `tokens` live on the CPU, as do the
  // logits returned, whatever the model's device: sampling draws from a CPU generator.
  torch::Tensor next(const torch::Tensor& tokens, int64_t length, int64_t fresh) {
    return next_on_device(tokens, length, fresh).to(torch::kCPU);
  }

 private:
  torch::Tensor next_on_device(const torch::Tensor& cpu_tokens, int64_t length, int64_t fresh) {
    const ModelConfig& c = model_->config();
    const torch::Device device = model_->device();
    // Past block_size an absolute position (learned, sinusoidal) moves with every token, so
    // every key and value of the window changes: the window is encoded whole each time, and a
    // cache filled with it would only be cleared at the next token (its writes made sampling
    // a nanoGPT-shaped model 0.7-0.9x as fast as no cache at all).
    const bool window_moved = !c.positions().slides() && length > c.block_size;
    const int64_t first_needed = std::max<int64_t>(0, length - std::max(fresh, c.block_size));
    const torch::Tensor tokens =
        device.is_cpu() ? cpu_tokens
                        : cpu_tokens.narrow(1, first_needed, length - first_needed).to(device);
    if (!device.is_cpu()) length -= first_needed;  // positions into the copied slice
    const int64_t window = std::min(length, c.block_size);
    torch::Tensor logits;
    if (!use_cache_ || window_moved) {
      logits = model_->forward(tokens.narrow(1, length - window, window));
    } else {
      if (cache_.length() == 0) fresh = window;
      if (fresh == 1 && can_decode_directly(model_, cache_)) {
        return decode_step(model_, tokens.select(1, length - 1), cache_);  // (B, V)
      }
      logits = model_->forward(tokens.narrow(1, length - fresh, fresh), cache_);
    }
    return logits.select(1, -1);  // (B, V)
  }

  GPT& model_;
  bool use_cache_;
  KVCache cache_;
};

}  // namespace

torch::Tensor sample_tokens(const torch::Tensor& logits, const SamplingOptions& options,
                            torch::Generator& generator) {
  torch::Tensor scores = logits.to(torch::kFloat32);  // (B, V)
  if (options.temperature <= 0.0) return scores.argmax(-1);
  scores = scores / options.temperature;
  const double neg_inf = -std::numeric_limits<double>::infinity();
  const int64_t V = scores.size(-1);
  if (options.top_k > 0 && options.top_k < V) {
    const torch::Tensor kth =
        std::get<0>(scores.topk(options.top_k, -1)).narrow(-1, options.top_k - 1, 1);
    scores = scores.masked_fill(scores < kth, neg_inf);
  }
  if (options.top_p < 1.0) {
    const auto [sorted, order] = scores.sort(/*dim=*/-1, /*descending=*/true);  // (B, V)
    const torch::Tensor probs = torch::softmax(sorted, -1);
    // Drop a token when the mass before it already reaches top_p. The likeliest always
    // stays, however small top_p is: a top_p below float's smallest normal number reads as
    // 0 in a comparison once denormals are flushed (set_threads does), which dropped it too.
    torch::Tensor drop_sorted = (probs.cumsum(-1) - probs) >= options.top_p;
    drop_sorted.select(-1, 0).fill_(false);
    const torch::Tensor drop = torch::zeros_like(drop_sorted).scatter(-1, order, drop_sorted);
    scores = scores.masked_fill(drop, neg_inf);
  }
  const torch::Tensor probs = torch::softmax(scores, -1);
  return torch::multinomial(probs, 1, false, generator).squeeze(-1);  // (B,)
}

int64_t sample_token(const torch::Tensor& logits, const SamplingOptions& options,
                     torch::Generator& generator) {
  return sample_tokens(logits.flatten().unsqueeze(0), options, generator).item<int64_t>();
}

std::vector<std::vector<int64_t>> generate(GPT& model, const std::vector<int64_t>& context,
                                           const GenerationOptions& options,
                                           torch::Generator& generator,
                                           const TokenCallback& on_token) {
  if (context.empty()) throw std::invalid_argument("generation needs at least one context token");
  c10::InferenceMode inference;  // no autograd bookkeeping at all
  const ScopedMode eval = eval_mode(*model);
  const int64_t B = options.num_samples, prompt = static_cast<int64_t>(context.size());
  // Every sample's tokens so far, (B, prompt + max_new_tokens).
  torch::Tensor tokens = torch::empty({B, prompt + options.max_new_tokens}, torch::kInt64);
  tokens.narrow(1, 0, prompt).copy_(torch::tensor(context).unsqueeze(0));
  std::vector<std::vector<int64_t>> produced(static_cast<size_t>(B));
  std::vector<bool> done(static_cast<size_t>(B), false);
  int64_t active = B;
  Stepper stepper(model, options.use_cache);
  int64_t length = prompt;
  for (int64_t n = 0; n < options.max_new_tokens && active > 0; ++n) {
    const torch::Tensor logits = stepper.next(tokens, length, n == 0 ? prompt : 1);  // (B, V)
    const torch::Tensor next = sample_tokens(logits, options.sampling, generator);   // (B,)
    tokens.select(1, length).copy_(next);
    ++length;
    const int64_t* ids = next.data_ptr<int64_t>();
    for (int64_t b = 0; b < B; ++b) {
      if (done[static_cast<size_t>(b)]) continue;
      produced[static_cast<size_t>(b)].push_back(ids[b]);
      if (on_token && !on_token(b, ids[b])) {
        done[static_cast<size_t>(b)] = true;
        --active;
      }
    }
  }
  return produced;
}

torch::Tensor step_logits(GPT& model, const torch::Tensor& tokens, int64_t prompt, bool use_cache) {
  c10::InferenceMode inference;
  const ScopedMode eval = eval_mode(*model);
  Stepper stepper(model, use_cache);
  std::vector<torch::Tensor> steps;
  for (int64_t length = prompt; length <= tokens.size(1); ++length) {
    steps.push_back(stepper.next(tokens, length, length == prompt ? prompt : 1));
  }
  return torch::stack(steps, 1);  // (B, S - prompt + 1, V)
}

}  // namespace tinylm
