#include "train/formats/llama2c_export.h"

#include <cstdint>
#include <stdexcept>

#include "data/io/atomic_file.h"
#include "data/sentencepiece_tokenizer.h"

namespace tinylm {
namespace fs = std::filesystem;

namespace {

void put_int(std::string& out, int32_t v) { out.append(reinterpret_cast<const char*>(&v), 4); }
void put_float(std::string& out, float v) { out.append(reinterpret_cast<const char*>(&v), 4); }

void put_tensor(std::string& out, const torch::Tensor& t) {
  const torch::Tensor c = t.detach().to(torch::kCPU, torch::kFloat32).contiguous();
  out.append(reinterpret_cast<const char*>(c.data_ptr<float>()),
             static_cast<size_t>(c.numel()) * sizeof(float));
}

// q or k rows (n hs, C) of n heads, each head's rows reordered from tinylm's half-split
// rotary pairs to llama2.c's interleaved ones: new row 2i = row i, new row 2i + 1 = row i + hs/2.
torch::Tensor interleaved_pairs(const torch::Tensor& w, int64_t n, int64_t hs) {
  const int64_t C = w.size(1);
  return w.view({n, 2, hs / 2, C}).transpose(1, 2).reshape({n * hs, C});
}

}  // namespace

std::vector<std::string> llama2c_incompatibilities(const ModelConfig& c) {
  std::vector<std::string> out;
  const auto quoted = [](auto value) { return std::string("\"") + name_of(value) + "\""; };
  if (c.pos_encoding != PosEncoding::kRope)
    out.push_back("model.pos_encoding = " + quoted(c.pos_encoding) + " (llama2.c's is rope)");
  if (c.norm != NormKind::kRmsNorm)
    out.push_back("model.norm = " + quoted(c.norm) + " (llama2.c's is rmsnorm)");
  if (c.mlp != MlpKind::kSwiglu)
    out.push_back("model.mlp = " + quoted(c.mlp) + " (llama2.c's is swiglu)");
  if (c.bias) out.push_back("model.bias = true (llama2.c has no biases)");
  if (c.attn_only) out.push_back("model.attn_only = true (llama2.c's blocks have an MLP)");
  return out;
}

void write_llama2c_model(const fs::path& path, GPT& model) {
  const ModelConfig& c = model->config();
  if (const auto problems = llama2c_incompatibilities(c); !problems.empty()) {
    std::string list;
    for (const std::string& p : problems) list += (list.empty() ? "" : "; ") + p;
    throw std::runtime_error("llama2.c cannot run this model: " + list);
  }
  torch::NoGradGuard no_grad;
  const int64_t C = c.n_embd, hs = c.head_size(), kv = c.kv_heads(), H = c.swiglu_hidden();
  std::string out;
  for (const int64_t v :
       {C, H, c.n_layer, c.n_head, kv, c.tie_weights ? c.vocab_size : -c.vocab_size, c.block_size})
    put_int(out, static_cast<int32_t>(v));
  put_tensor(out, model->transformer->wte->weight);
  const auto& blocks = model->transformer->h;
  const auto each = [&](const std::function<torch::Tensor(Block&)>& part) {
    for (Block block : blocks) put_tensor(out, part(block));
  };
  const auto c_attn = [](Block& b) { return b->attn->c_attn->weight; };  // (C + 2 kv hs, C)
  each([](Block& b) { return b->ln_1->weight; });
  each([&](Block& b) { return interleaved_pairs(c_attn(b).narrow(0, 0, C), c.n_head, hs); });
  each([&](Block& b) { return interleaved_pairs(c_attn(b).narrow(0, C, kv * hs), kv, hs); });
  each([&](Block& b) { return c_attn(b).narrow(0, C + kv * hs, kv * hs); });
  each([](Block& b) { return b->attn->c_proj->weight; });
  each([](Block& b) { return b->ln_2->weight; });
  each([&](Block& b) { return b->mlp->c_fc->weight.narrow(0, 0, H); });  // gate: w1
  each([](Block& b) { return b->mlp->c_proj->weight; });                 // down: w2
  each([&](Block& b) { return b->mlp->c_fc->weight.narrow(0, H, H); });  // up: w3
  put_tensor(out, model->transformer->ln_f->weight);
  const RopeTables rope = rope_tables(c.block_size, hs);  // skipped by run.c, written by v0
  put_tensor(out, rope.cos);
  put_tensor(out, rope.sin);
  if (!c.tie_weights) put_tensor(out, model->unembedding());
  write_file_atomic(path, out);
}

void write_llama2c_tokenizer(const fs::path& path, const Tokenizer& tokenizer) {
  const auto* sp = dynamic_cast<const SentencePieceTokenizer*>(&tokenizer);
  std::vector<std::string> pieces;
  size_t longest = 0;
  for (int64_t id = 0; id < tokenizer.vocab_size(); ++id) {
    // SentencePiece's pieces as tokenizer.py writes them ("▁" as a space, "<0x0A>" as it
    // is, which run.c decodes); a char or byte token's own bytes.
    std::string piece = sp ? sp->piece(id) : tokenizer.token_bytes(id);
    for (size_t at; sp && (at = piece.find("\u2581")) != std::string::npos;)
      piece.replace(at, 3, " ");
    longest = std::max(longest, piece.size());
    pieces.push_back(piece);
  }
  std::string out;
  put_int(out, static_cast<int32_t>(longest));
  for (size_t id = 0; id < pieces.size(); ++id) {
    put_float(out, sp ? sp->score(static_cast<int64_t>(id)) : 0.0f);
    put_int(out, static_cast<int32_t>(pieces[id].size()));
    out += pieces[id];
  }
  write_file_atomic(path, out);
}

}  // namespace tinylm
