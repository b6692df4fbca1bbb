// SentencePiece models (tokenizer.model) through our wrapper, libtinylm_sentencepiece.so:
// load, then every call the tokenizer makes on what loaded. In a process of its own without
// LibTorch, so the library is opened without RTLD_DEEPBIND (which AddressSanitizer refuses)
// and without the protobuf clash that DEEPBIND is there to avoid.

#include <dlfcn.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "data/sentencepiece_api.h"

namespace {

struct Api {
  decltype(&tinylm_spm_load) load;
  decltype(&tinylm_spm_destroy) destroy;
  decltype(&tinylm_spm_vocab_size) vocab_size;
  decltype(&tinylm_spm_encode) encode;
  decltype(&tinylm_spm_decode) decode;
  decltype(&tinylm_spm_piece) piece;
  decltype(&tinylm_spm_score) score;
  decltype(&tinylm_spm_free) free;
};

const Api& api() {
  static const Api api = [] {
    void* handle = ::dlopen(TINYLM_SENTENCEPIECE_LIBRARY, RTLD_NOW | RTLD_LOCAL);
    if (!handle) std::abort();
    const auto get = [&](const char* name) {
      void* f = ::dlsym(handle, name);
      if (!f) std::abort();
      return f;
    };
    Api a;
    a.load = reinterpret_cast<decltype(a.load)>(get("tinylm_spm_load"));
    a.destroy = reinterpret_cast<decltype(a.destroy)>(get("tinylm_spm_destroy"));
    a.vocab_size = reinterpret_cast<decltype(a.vocab_size)>(get("tinylm_spm_vocab_size"));
    a.encode = reinterpret_cast<decltype(a.encode)>(get("tinylm_spm_encode"));
    a.decode = reinterpret_cast<decltype(a.decode)>(get("tinylm_spm_decode"));
    a.piece = reinterpret_cast<decltype(a.piece)>(get("tinylm_spm_piece"));
    a.score = reinterpret_cast<decltype(a.score)>(get("tinylm_spm_score"));
    a.free = reinterpret_cast<decltype(a.free)>(get("tinylm_spm_free"));
    return a;
  }();
  return api;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Api& spm = api();
  tinylm_spm* model = nullptr;
  char* error = nullptr;
  if (spm.load(reinterpret_cast<const char*>(data), size, &model, &error) != 0) {
    spm.free(error);  // refused, with a message: the right answer
    return 0;
  }
  const int n = spm.vocab_size(model);
  for (int id = 0; id < n; ++id) {
    int kind = 0;
    spm.piece(model, id, &kind);
    spm.score(model, id);
  }
  const std::string text = "Hello, world!\n\tit's 2026 \xc3\xa9\n";
  int32_t* ids = nullptr;
  size_t count = 0;
  if (spm.encode(model, text.data(), text.size(), &ids, &count, &error) == 0) {
    char* decoded = nullptr;
    size_t decoded_size = 0;
    if (spm.decode(model, ids, count, &decoded, &decoded_size, &error) == 0) {
      spm.free(decoded);
    } else {
      spm.free(error);
    }
    spm.free(ids);
  } else {
    spm.free(error);
  }
  spm.destroy(model);
  return 0;
}
