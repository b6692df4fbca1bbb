#pragma once
// `prepare`: a corpus tokenized once into a cache directory, read memory-mapped ever after.
//   ROOT/KEY/tokenizer.json (+ tokenizer.model)   the tokenizer that made the tokens
//   ROOT/KEY/train.bin  ROOT/KEY/val.bin           token files (data/token_file.h)
// KEY names one tokenization ("char-1a2b3c4d5e6f": the tokenizer's kind and a fingerprint
// of the recipe, the files' names and the split), so configs that share a root never share,
// relabel or rebuild each other's token files; an edited corpus rebuilds its own KEY. A run's
// own tokenizer that is not the one in KEY (a SentencePiece model trained anew, say) gets
// KEY-<its fingerprint> instead. A cache is reused only when both token files name the
// tokenizer in its directory and the fingerprint of the sources and the recipe; anything else
// (a changed corpus, another tokenizer, a damaged file) rebuilds it and says why. The corpus
// streams through in chunks of whole lines, encoded on several threads, so memory stays
// bounded; every file is written under a temporary name, so a crash or a full disk never
// leaves a partial file that looks whole. A cache directory a failed call made is removed.

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "data/token_sequence.h"
#include "data/tokenizer.h"

namespace tinylm {

struct TokenCacheSpec {
  std::filesystem::path root;  // data.cache_dir; the cache is a directory inside it
  std::string kind;            // the tokenizer's kind, for the directory's name
  std::vector<std::filesystem::path> train_files;
  std::vector<std::filesystem::path> val_files;  // empty: the last part of the tokens validates
  double train_fraction = 0.9;                   // of the tokens, when val_files is empty
  uint64_t recipe_fingerprint = 0;               // the caller's settings that shape the tokens
  size_t chunk_bytes = size_t{4} << 20;
  int threads = 1;
  bool force = false;  // rebuild even a current cache (prepare --force)
  // Called as the text is encoded: bytes done, bytes in all.
  std::function<void(uint64_t done, uint64_t total)> progress;
};

struct PreparedCorpus {
  std::filesystem::path dir;  // the cache directory used
  std::shared_ptr<const Tokenizer> tokenizer;
  TokenSplit train;
  TokenSplit val;
  bool rebuilt = false;
  uint64_t source_bytes = 0;  // of a rebuild: the text read, and how long it took
  double seconds = 0.0;
};

// Reuses or rebuilds the cache. `make_tokenizer` runs only when a rebuild needs a tokenizer
// and `fixed` is null; with `fixed`, the cache must have been made by that tokenizer.
PreparedCorpus prepare_token_cache(
    const TokenCacheSpec& spec, std::shared_ptr<const Tokenizer> fixed,
    const std::function<std::unique_ptr<Tokenizer>()>& make_tokenizer);

// The cache directory of `spec` for `fixed` (the run's own tokenizer, or null).
std::filesystem::path token_cache_dir(const TokenCacheSpec& spec, const Tokenizer* fixed);

// Why the cache of `spec` cannot be used as it is ("" when it can).
std::string token_cache_problem(const TokenCacheSpec& spec, const Tokenizer* fixed);

// The fingerprint of everything that shapes the tokens but the tokenizer.
uint64_t source_fingerprint(const TokenCacheSpec& spec);

// The corpus at `path` (a file or a directory of *.txt; `origin` names the flag it came from),
// encoded in memory file by file, so that an error names the file and its own line.
TokenSplit encode_corpus_in_memory(const Tokenizer& tokenizer, const std::filesystem::path& path,
                                   const std::string& origin);

// Encodes `text` in the same line-aligned way prepare does; for text held in memory.
TokenSplit encode_in_memory(const Tokenizer& tokenizer, std::string_view text,
                            std::string_view source);

}  // namespace tinylm
