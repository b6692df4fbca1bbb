#pragma once
// The C interface of libtinylm_sentencepiece.so, the one place that touches SentencePiece.
// Debian's libsentencepiece carries its own protobuf, which clashes with the one LibTorch
// links; the library is therefore loaded with dlopen(RTLD_DEEPBIND) by
// data/sentencepiece_tokenizer.cpp and nothing else sees it. Plain C types only: no C++
// object and no exception crosses this boundary. Every function that can fail returns 0 on
// success, or non-zero with *error set to a message the caller frees with tinylm_spm_free.

#include <stddef.h>
#include <stdint.h>

extern "C" {

struct tinylm_spm;

enum tinylm_spm_piece_kind {
  TINYLM_SPM_NORMAL = 0,
  TINYLM_SPM_UNKNOWN = 1,
  TINYLM_SPM_CONTROL = 2,
  TINYLM_SPM_BYTE = 3,
};

// Loads a model from the bytes of a .model file.
int tinylm_spm_load(const char* bytes, size_t size, tinylm_spm** model, char** error);
void tinylm_spm_destroy(tinylm_spm* model);
int tinylm_spm_vocab_size(const tinylm_spm* model);

// Encodes line by line, each line with its '\n' on its own: the ids do not depend on how a
// text is cut into chunks at line ends, and the unigram model's Viterbi search keeps its
// float precision (over a whole megabyte it picks visibly worse segmentations).
// *ids is malloc'd, *count entries.
int tinylm_spm_encode(const tinylm_spm* model, const char* text, size_t size, int32_t** ids,
                      size_t* count, char** error);
// *text is malloc'd, *size bytes, not terminated.
int tinylm_spm_decode(const tinylm_spm* model, const int32_t* ids, size_t count, char** text,
                      size_t* size, char** error);
// The piece of `id` (valid while the model lives) and its kind; id must be in range.
const char* tinylm_spm_piece(const tinylm_spm* model, int id, int* kind);
// The piece's score: its log probability (unigram) or merge rank (BPE, negative); id in range.
float tinylm_spm_score(const tinylm_spm* model, int id);

// Supplies the next training sentence; returns 1 with *text/*size set, 0 at the end, and -1
// on an error (which the caller keeps on its side).
typedef int (*tinylm_spm_next_sentence)(void* context, const char** text, size_t* size);

// Trains a model with SentencePiece's options as key/value pairs ("vocab_size" -> "8000");
// *model is the malloc'd bytes of the .model file.
int tinylm_spm_train(const char* const* keys, const char* const* values, size_t count,
                     tinylm_spm_next_sentence next, void* context, char** model, size_t* model_size,
                     char** error);

void tinylm_spm_free(void* pointer);

}  // extern "C"
