#pragma once
// The position encodings, and every fact about them that the rest of tinylm acts on, decided
// here once: what enters the residual stream (the GPT, the decode step), what attention does
// with positions (rotation, a score bias), whether a KV cache's window slides, whether a
// window may be longer than block_size. The model, attention, the decode step, the analyses
// and the command line ask these traits; none switches on model.pos_encoding for them. A new
// encoding is a row of position_traits() here, its mechanism's file (as rope.h and
// position_bias.h are), and its use in attention.cpp and ops/decode_step.cpp.

#include <array>
#include <cmath>
#include <cstdint>

namespace tinylm {

// relative: T5's learned bias per head per bucket of distance; alibi: fixed linear penalties
// (model/position_bias.h); rope: model/rope.h.
enum class PosEncoding { kLearned, kSinusoidal, kRope, kNone, kRelative, kAlibi };

constexpr std::array<const char*, 6> enum_names(PosEncoding) {
  return {"learned", "sinusoidal", "rope", "none", "relative", "alibi"};
}

struct PositionTraits {
  bool adds_table = false;     // a (T, C) table is added to the token embeddings
  bool learned_table = false;  // that table is a parameter, transformer.wpe (else sinusoids)
  bool rotates = false;        // q and k are rotated by their positions (rope)
  bool extrapolates = true;    // windows longer than block_size have positions
  // Token embeddings are multiplied by sqrt(n_embd) before the table is added (Vaswani et
  // al., section 3.4): at init they are N(0, 0.02^2) against sinusoids of magnitude ~0.7,
  // which would otherwise drown what the token is.
  bool scales_tokens = false;

  // Nothing about a position enters the residual stream, so cached keys and values stay
  // valid when the window moves: a KV cache past block_size drops its oldest position and
  // goes on. With a table, every position in the window changes and it is re-encoded.
  bool slides() const { return !adds_table; }
  double token_scale(int64_t n_embd) const {
    return scales_tokens ? std::sqrt(static_cast<double>(n_embd)) : 1.0;
  }
};

inline PositionTraits position_traits(PosEncoding encoding) {
  PositionTraits t;
  switch (encoding) {
    case PosEncoding::kLearned:
      t.adds_table = t.learned_table = true;
      t.extrapolates = false;  // the table has block_size rows
      break;
    case PosEncoding::kSinusoidal: t.adds_table = t.scales_tokens = true; break;
    case PosEncoding::kRope: t.rotates = true; break;
    case PosEncoding::kNone:
    case PosEncoding::kRelative:  // a score bias inside attention (model/position_bias.h)
    case PosEncoding::kAlibi: break;
  }
  return t;
}

}  // namespace tinylm
