// libtinylm_sentencepiece.so: SentencePiece behind the C interface of sentencepiece_api.h.
// Built as its own shared library and linked against Debian's libsentencepiece only; see
// the header for why.

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include "data/sentencepiece_api.h"

struct tinylm_spm {
  sentencepiece::SentencePieceProcessor processor;
};

namespace {

char* copy_out(const std::string& s) {
  char* out = static_cast<char*>(std::malloc(s.size() + 1));
  if (out) std::memcpy(out, s.c_str(), s.size() + 1);
  return out;
}

int fail(char** error, const std::string& message) {
  if (error) *error = copy_out(message);
  return 1;
}

// Feeds SentencePiece's trainer from the caller's callback.
class CallbackSentences : public sentencepiece::SentenceIterator {
 public:
  CallbackSentences(tinylm_spm_next_sentence next, void* context) : next_(next), context_(context) {
    Next();
  }
  bool done() const override { return done_; }
  void Next() override {
    const char* text = nullptr;
    size_t size = 0;
    const int got = next_(context_, &text, &size);
    if (got == 1) {
      value_.assign(text, size);
    } else {
      done_ = true;
      if (got < 0)
        status_ = sentencepiece::util::Status(sentencepiece::util::StatusCode::kAborted,
                                              "reading the training text failed");
    }
  }
  const std::string& value() const override { return value_; }
  sentencepiece::util::Status status() const override { return status_; }

 private:
  tinylm_spm_next_sentence next_;
  void* context_;
  std::string value_;
  bool done_ = false;
  sentencepiece::util::Status status_;
};

}  // namespace

extern "C" {

int tinylm_spm_load(const char* bytes, size_t size, tinylm_spm** model, char** error) {
  try {
    // Owned until it loads: LoadFromSerializedProto may throw as well as fail.
    auto m = std::make_unique<tinylm_spm>();
    const auto status = m->processor.LoadFromSerializedProto(std::string(bytes, size));
    if (!status.ok()) return fail(error, status.ToString());
    *model = m.release();
    return 0;
  } catch (const std::exception& e) {
    return fail(error, e.what());
  }
}

void tinylm_spm_destroy(tinylm_spm* model) { delete model; }

int tinylm_spm_vocab_size(const tinylm_spm* model) { return model->processor.GetPieceSize(); }

int tinylm_spm_encode(const tinylm_spm* model, const char* text, size_t size, int32_t** ids,
                      size_t* count, char** error) {
  try {
    std::vector<int32_t> all;
    std::vector<int> line_ids;
    const std::string_view whole(text, size);
    for (size_t begin = 0; begin < size;) {
      const size_t newline = whole.find('\n', begin);
      const size_t end = newline == std::string_view::npos ? size : newline + 1;
      const auto status = model->processor.Encode(whole.substr(begin, end - begin), &line_ids);
      if (!status.ok()) return fail(error, status.ToString());
      all.insert(all.end(), line_ids.begin(), line_ids.end());
      begin = end;
    }
    *ids = static_cast<int32_t*>(std::malloc(std::max<size_t>(all.size(), 1) * sizeof(int32_t)));
    if (!*ids) return fail(error, "out of memory");
    std::memcpy(*ids, all.data(), all.size() * sizeof(int32_t));
    *count = all.size();
    return 0;
  } catch (const std::exception& e) {
    return fail(error, e.what());
  }
}

int tinylm_spm_decode(const tinylm_spm* model, const int32_t* ids, size_t count, char** text,
                      size_t* size, char** error) {
  try {
    const std::vector<int> in(ids, ids + count);
    std::string out;
    const auto status = model->processor.Decode(in, &out);
    if (!status.ok()) return fail(error, status.ToString());
    *text = copy_out(out);
    if (!*text) return fail(error, "out of memory");
    *size = out.size();
    return 0;
  } catch (const std::exception& e) {
    return fail(error, e.what());
  }
}

const char* tinylm_spm_piece(const tinylm_spm* model, int id, int* kind) {
  const auto& p = model->processor;
  *kind = p.IsUnknown(id)   ? TINYLM_SPM_UNKNOWN
          : p.IsControl(id) ? TINYLM_SPM_CONTROL
          : p.IsByte(id)    ? TINYLM_SPM_BYTE
                            : TINYLM_SPM_NORMAL;
  return p.IdToPiece(id).c_str();
}

float tinylm_spm_score(const tinylm_spm* model, int id) { return model->processor.GetScore(id); }

int tinylm_spm_train(const char* const* keys, const char* const* values, size_t count,
                     tinylm_spm_next_sentence next, void* context, char** model, size_t* model_size,
                     char** error) {
  try {
    std::unordered_map<std::string, std::string> options;
    for (size_t i = 0; i < count; ++i) options[keys[i]] = values[i];
    CallbackSentences sentences(next, context);
    std::string serialized;
    const auto status =
        sentencepiece::SentencePieceTrainer::Train(options, &sentences, &serialized);
    if (!status.ok()) return fail(error, status.ToString());
    *model = static_cast<char*>(std::malloc(std::max<size_t>(serialized.size(), 1)));
    if (!*model) return fail(error, "out of memory");
    std::memcpy(*model, serialized.data(), serialized.size());
    *model_size = serialized.size();
    return 0;
  } catch (const std::exception& e) {
    return fail(error, e.what());
  }
}

void tinylm_spm_free(void* pointer) { std::free(pointer); }

}  // extern "C"
