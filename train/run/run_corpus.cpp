#include "train/run/run_corpus.h"

#include <chrono>
#include <stdexcept>
#include <thread>

#include <spdlog/spdlog.h>

#include "data/char_tokenizer.h"
#include "data/corpus.h"
#include "data/gpt2_tokenizer.h"
#include "data/induction_corpus.h"
#include "data/io/files.h"
#include "data/io/fingerprint.h"
#include "data/sentencepiece_tokenizer.h"
#include "data/token_cache.h"
#include "data/utf8.h"
#include "train/run/progress.h"

namespace tinylm {
namespace fs = std::filesystem;

namespace {

std::vector<fs::path> val_files(const DataConfig& d) {
  return d.val_path.empty() ? std::vector<fs::path>{} : corpus_files(d.val_path, "data.val_path");
}

// Everything in [data] that shapes the tokens, apart from the corpus text.
uint64_t recipe_fingerprint(const DataConfig& d) {
  Fingerprint f;
  f.add_field(name_of(d.tokenizer));  // the names, as before enums: caches stay valid
  if (d.tokenizer == TokenizerKind::kGpt2) {
    // The files' contents while they are there: an imported run keeps its own copy, so the
    // download it came from may go (the run's tokenizer then rebuilds the cache).
    const fs::path dir(d.tokenizer_model);
    const std::vector<fs::path> files = {dir / "vocab.json", dir / "merges.txt"};
    f.add_field("gpt2 " + d.tokenizer_model);
    if (fs::is_regular_file(files[0]) && fs::is_regular_file(files[1]))
      f.add_field(to_hex(fingerprint_files(files)));
  }
  if (d.tokenizer == TokenizerKind::kSentencePiece) {
    if (!d.tokenizer_model.empty()) {
      f.add_field("model " + to_hex(fingerprint_files({d.tokenizer_model})));
    } else {
      f.add_field(name_of(d.model_type)).add_field(std::to_string(d.vocab_size));
      f.add_field(std::to_string(d.character_coverage)).add_field(d.byte_fallback ? "1" : "0");
      for (const std::string& s : d.user_defined_symbols) f.add_field(s);
    }
  }
  return f.value();
}

// The character set of every file, train and val, read in chunks.
std::unique_ptr<Tokenizer> char_tokenizer_of(const std::vector<fs::path>& files) {
  std::vector<bool> seen(0x110000, false);
  CorpusReader reader(files, size_t{4} << 20);
  CorpusReader::Chunk chunk;
  while (reader.next(chunk)) {
    for (char32_t cp : decode_utf8(chunk.text, chunk.file.string())) seen[cp] = true;
  }
  std::vector<char32_t> vocab;
  for (char32_t cp = 0; cp < seen.size(); ++cp) {
    if (seen[cp]) vocab.push_back(cp);
  }
  if (vocab.empty()) throw std::runtime_error("the corpus is empty: every file in it is empty");
  return std::make_unique<CharTokenizer>(std::move(vocab));
}

// SentencePiece trained on the lines of the train text: the first train_fraction of the
// bytes when the corpus is split, so the val text never shapes the vocabulary.
std::unique_ptr<Tokenizer> train_tokenizer(const DataConfig& d,
                                           const std::vector<fs::path>& files) {
  uint64_t total = 0;
  for (const fs::path& file : files) total += fs::file_size(file);
  const uint64_t limit = d.val_path.empty()
                             ? static_cast<uint64_t>(d.train_fraction * static_cast<double>(total))
                             : total;
  SentencePieceTraining options;
  options.model_type = name_of(d.model_type);
  options.vocab_size = d.vocab_size;
  options.character_coverage = d.character_coverage;
  options.byte_fallback = d.byte_fallback;
  options.user_defined_symbols = d.user_defined_symbols;
  options.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  CorpusReader reader(files, size_t{4} << 20);
  CorpusReader::Chunk chunk;
  size_t at = 0;
  uint64_t given = 0;
  const auto next_line = [&](std::string& line) {
    if (given >= limit) return false;
    if (at >= chunk.text.size()) {
      if (!reader.next(chunk)) return false;
      at = 0;
    }
    const size_t newline = chunk.text.find('\n', at);
    const size_t end = newline == std::string::npos ? chunk.text.size() : newline + 1;
    line.assign(chunk.text, at, end - at);
    given += end - at;
    at = end;
    return true;
  };
  const auto start = std::chrono::steady_clock::now();
  spdlog::info("training a SentencePiece {} tokenizer of {} pieces on {:.1f} MB of {}",
               name_of(d.model_type), d.vocab_size, static_cast<double>(limit) / 1e6, d.path);
  auto tokenizer = train_sentencepiece(options, next_line, d.path);
  spdlog::info("tokenizer trained in {:.1f} s",
               std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return tokenizer;
}

std::unique_ptr<Tokenizer> make_tokenizer(const DataConfig& d) {
  if (d.tokenizer == TokenizerKind::kByte) return make_byte_tokenizer();
  if (d.tokenizer == TokenizerKind::kGpt2) {
    const fs::path dir(d.tokenizer_model);
    return Gpt2Tokenizer::from_files(dir / "vocab.json", dir / "merges.txt");
  }
  if (d.tokenizer == TokenizerKind::kChar) {
    std::vector<fs::path> files = corpus_files(d.path);
    for (const fs::path& f : val_files(d)) files.push_back(f);
    return char_tokenizer_of(files);
  }
  if (!d.tokenizer_model.empty()) return SentencePieceTokenizer::from_file(d.tokenizer_model);
  return train_tokenizer(d, corpus_files(d.path));
}

// The generated corpus, tokenized in memory and split by data.train_fraction.
RunData synthetic_data(const RunConfig& config, std::shared_ptr<const Tokenizer> tokenizer) {
  const std::string text =
      induction_corpus(config.data.synthetic_size, static_cast<uint64_t>(config.train.seed),
                       config.data.induction_shape());
  if (!tokenizer) {
    tokenizer = config.data.tokenizer == TokenizerKind::kByte
                    ? std::shared_ptr<const Tokenizer>(make_byte_tokenizer())
                    : std::make_shared<CharTokenizer>(CharTokenizer::from_text(text));
  }
  const auto n_train =
      static_cast<size_t>(config.data.train_fraction * static_cast<double>(text.size()));
  // The corpus is ASCII: one byte, one character, one token, so the split is the same.
  RunData data;
  data.train = encode_in_memory(*tokenizer, std::string_view(text).substr(0, n_train),
                                describe_corpus(config));
  data.val =
      encode_in_memory(*tokenizer, std::string_view(text).substr(n_train), describe_corpus(config));
  data.tokenizer = std::move(tokenizer);
  return data;
}

}  // namespace

std::string describe_corpus(const RunConfig& config) {
  if (config.data.source == DataSource::kInduction) {
    const InductionShape shape = config.data.induction_shape();
    return "the synthetic induction corpus (" + std::to_string(config.data.synthetic_size) +
           " characters, seed " + std::to_string(config.train.seed) + "; " +
           (shape.prefix_max > 0 ? "prefixes of 0-" + std::to_string(shape.prefix_max) + ", "
                                 : std::string()) +
           "repeats of " + std::to_string(shape.repeat_min) + "-" +
           std::to_string(shape.repeat_max) + ", " + std::to_string(shape.symbols) + " symbols)";
  }
  return config.data.path;
}

RunData load_run_data(const RunConfig& config, const RunDataOptions& options) {
  if (config.data.source == DataSource::kInduction)
    return synthetic_data(config, options.tokenizer);
  if (config.data.cache_dir.empty()) {
    throw std::invalid_argument(
        "data.cache_dir is not set: tinylm needs a directory for token files");
  }
  TokenCacheSpec spec;
  spec.root = config.data.cache_dir;
  spec.kind = name_of(config.data.tokenizer);
  spec.force = options.force;
  spec.train_files = corpus_files(config.data.path);
  spec.val_files = val_files(config.data);
  spec.train_fraction = config.data.train_fraction;
  spec.recipe_fingerprint = recipe_fingerprint(config.data);
  spec.threads = options.threads > 0
                     ? options.threads
                     : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  ProgressLine line(options.progress);
  const auto start = std::chrono::steady_clock::now();
  spec.progress = [&](uint64_t done, uint64_t total) {
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    line.update_bytes("tokenizing", done, total, seconds);
  };
  PreparedCorpus prepared =
      prepare_token_cache(spec, options.tokenizer, [&] { return make_tokenizer(config.data); });
  line.clear();
  if (prepared.rebuilt) {
    const double mb = static_cast<double>(prepared.source_bytes) / 1e6;
    spdlog::info("prepared {}: {} train / {} val tokens from {:.1f} MB in {:.1f} s ({:.1f} MB/s)",
                 prepared.dir.string(), prepared.train.tokens.size(), prepared.val.tokens.size(),
                 mb, prepared.seconds, mb / std::max(prepared.seconds, 1e-9));
  }
  return {prepared.dir.string(), std::move(prepared.tokenizer), std::move(prepared.train),
          std::move(prepared.val)};
}

}  // namespace tinylm
