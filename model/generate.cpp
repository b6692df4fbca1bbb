#include "model/generate.h"

#include <limits>
#include <stdexcept>

namespace tinylm {

int64_t sample_token(const torch::Tensor& logits, const SamplingOptions& options,
                     torch::Generator& generator) {
  torch::Tensor scores = logits.to(torch::kFloat32).flatten();  // (V,)
  if (options.temperature <= 0.0) return scores.argmax().item<int64_t>();
  scores = scores / options.temperature;
  const double neg_inf = -std::numeric_limits<double>::infinity();
  const int64_t V = scores.size(0);
  if (options.top_k > 0 && options.top_k < V) {
    const torch::Tensor kth = std::get<0>(scores.topk(options.top_k)).index({-1});
    scores = scores.masked_fill(scores < kth, neg_inf);
  }
  if (options.top_p < 1.0) {
    const auto [sorted, order] = scores.sort(/*dim=*/0, /*descending=*/true);  // (V,)
    const torch::Tensor probs = torch::softmax(sorted, 0);
    // Drop a token when the mass before it already reaches top_p; the first always stays.
    const torch::Tensor drop_sorted = (probs.cumsum(0) - probs) >= options.top_p;
    const torch::Tensor drop = torch::zeros_like(drop_sorted).scatter(0, order, drop_sorted);
    scores = scores.masked_fill(drop, neg_inf);
  }
  const torch::Tensor probs = torch::softmax(scores, 0);
  return torch::multinomial(probs, 1, false, generator).item<int64_t>();
}

std::vector<int64_t> generate(GPT& model, std::vector<int64_t> context, int64_t max_new_tokens,
                              const SamplingOptions& options, torch::Generator& generator,
                              const std::function<void(int64_t)>& on_token) {
  if (context.empty()) throw std::invalid_argument("generation needs at least one context token");
  torch::NoGradGuard no_grad;
  model->eval();
  const auto block = static_cast<size_t>(model->config().block_size);
  std::vector<int64_t> produced;
  produced.reserve(static_cast<size_t>(max_new_tokens));
  for (int64_t n = 0; n < max_new_tokens; ++n) {
    const size_t start = context.size() > block ? context.size() - block : 0;
    const torch::Tensor idx =
        torch::tensor(std::vector<int64_t>(context.begin() + static_cast<std::ptrdiff_t>(start),
                                           context.end()))
            .unsqueeze(0);                                   // (1, T)
    const torch::Tensor logits = model->forward(idx);        // (1, T, V)
    const int64_t next = sample_token(logits[0][-1], options, generator);
    context.push_back(next);
    produced.push_back(next);
    if (on_token) on_token(next);
  }
  return produced;
}

}  // namespace tinylm
