#include "data/token_cache.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <deque>
#include <future>
#include <stdexcept>

#include <spdlog/spdlog.h>

#include "data/corpus.h"
#include "data/io/files.h"
#include "data/io/fingerprint.h"
#include "data/io/made_directory.h"
#include "data/token_file.h"

namespace tinylm {
namespace fs = std::filesystem;

namespace {

// An exclusive lock on the cache directory for as long as it lives: two runs of one config
// started together tokenize once, not over each other.
class DirectoryLock {
 public:
  explicit DirectoryLock(const fs::path& dir) {
    const fs::path path = dir / ".lock";
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0)
      throw std::runtime_error("cannot write to the token cache " + dir.string() + ": " +
                               std::strerror(errno));
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      spdlog::info("waiting for another tinylm that is preparing {}", dir.string());
      ::flock(fd_, LOCK_EX);
    }
  }
  ~DirectoryLock() { ::close(fd_); }
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;

 private:
  int fd_ = -1;
};

// UTF-8 bytes each id stands for, to count the text behind a run of tokens.
std::vector<uint32_t> byte_lengths(const Tokenizer& tokenizer) {
  std::vector<uint32_t> lengths(static_cast<size_t>(tokenizer.vocab_size()));
  for (int64_t id = 0; id < tokenizer.vocab_size(); ++id) {
    lengths[static_cast<size_t>(id)] = static_cast<uint32_t>(tokenizer.token_bytes(id).size());
  }
  return lengths;
}

uint64_t count_bytes(const std::vector<uint32_t>& lengths, const int64_t* ids, size_t count) {
  uint64_t bytes = 0;
  for (size_t i = 0; i < count; ++i) bytes += lengths[static_cast<size_t>(ids[i])];
  return bytes;
}

// Encodes `files` into `out` chunk by chunk, `threads` chunks at a time, in order.
uint64_t encode_files(const std::vector<fs::path>& files, const Tokenizer& tokenizer,
                      const TokenCacheSpec& spec, const std::vector<uint32_t>& lengths,
                      TokenFileWriter& out, uint64_t& done_bytes, uint64_t total_bytes) {
  CorpusReader reader(files, spec.chunk_bytes,
                      [&tokenizer](std::string_view text) { return tokenizer.cut_point(text); });
  std::deque<std::future<std::vector<int64_t>>> pending;
  uint64_t text_bytes = 0;
  const auto write_oldest = [&] {
    const std::vector<int64_t> ids = pending.front().get();
    pending.pop_front();
    out.append(ids.data(), ids.size());
    text_bytes += count_bytes(lengths, ids.data(), ids.size());
  };
  CorpusReader::Chunk chunk;
  uint64_t read_before = 0;
  while (reader.next(chunk)) {
    auto text = std::make_shared<const std::string>(std::move(chunk.text));
    const std::string source =
        chunk.file.string() + " (from byte " + std::to_string(chunk.offset) + ")";
    pending.push_back(std::async(std::launch::async, [&tokenizer, text, source] {
      return tokenizer.encode(*text, source);
    }));
    if (pending.size() >= static_cast<size_t>(std::max(1, spec.threads))) write_oldest();
    done_bytes += reader.bytes_read() - read_before;
    read_before = reader.bytes_read();
    if (spec.progress) spec.progress(done_bytes, total_bytes);
  }
  while (!pending.empty()) write_oldest();
  return text_bytes;
}

uint64_t total_size(const std::vector<fs::path>& files) {
  uint64_t bytes = 0;
  for (const fs::path& file : files) bytes += fs::file_size(file);
  return bytes;
}

std::string cache_problem(const fs::path& dir, const Tokenizer* fixed, uint64_t source_fp,
                          std::unique_ptr<Tokenizer>& cached) {
  const fs::path train = dir / "train.bin", val = dir / "val.bin";
  if (!fs::exists(train) || !fs::exists(val))
    return "there is no token cache in " + dir.string() + " yet";
  TokenFileHeader headers[2];
  try {
    headers[0] = read_token_file_header(train);
    headers[1] = read_token_file_header(val);
    cached = load_tokenizer(dir);
  } catch (const std::exception& e) {
    return e.what();
  }
  for (const TokenFileHeader& h : headers) {
    if (h.source_fingerprint != source_fp) {
      return "the corpus or the data settings changed since " + dir.string() + " was made";
    }
    if (h.tokenizer_fingerprint != cached->fingerprint() ||
        h.vocab_size != static_cast<uint64_t>(cached->vocab_size())) {
      return "the token files in " + dir.string() + " were made with another tokenizer";
    }
  }
  if (fixed && fixed->fingerprint() != cached->fingerprint()) {
    return "the cache in " + dir.string() + " was made with another tokenizer than this run's";
  }
  return "";
}

PreparedCorpus rebuild(const TokenCacheSpec& spec, const fs::path& dir, uint64_t source_fp,
                       std::shared_ptr<const Tokenizer> tokenizer) {
  const auto start = std::chrono::steady_clock::now();
  for (const auto& entry : fs::directory_iterator(dir)) {  // left by a crash
    if (entry.path().filename().string().find(".tmp-") != std::string::npos)
      fs::remove(entry.path());
  }
  fs::remove(dir / "train.bin");  // no old file outlives a failed rebuild
  fs::remove(dir / "val.bin");
  tokenizer->save(dir);
  const std::vector<uint32_t> lengths = byte_lengths(*tokenizer);
  TokenFileHeader header;
  header.token_width = token_width_for(tokenizer->vocab_size());
  header.vocab_size = static_cast<uint64_t>(tokenizer->vocab_size());
  header.tokenizer_fingerprint = tokenizer->fingerprint();
  header.source_fingerprint = source_fp;
  TokenFileWriter train(dir / "train.bin", header);
  TokenFileWriter val(dir / "val.bin", header);

  const uint64_t total = total_size(spec.train_files) + total_size(spec.val_files);
  uint64_t done = 0;
  uint64_t train_bytes =
      encode_files(spec.train_files, *tokenizer, spec, lengths, train, done, total);
  uint64_t val_bytes = 0;
  if (spec.val_files.empty()) {
    const uint64_t n = train.count();
    const auto n_train = static_cast<uint64_t>(spec.train_fraction * static_cast<double>(n));
    std::vector<int64_t> block;
    for (uint64_t at = n_train; at < n; at += block.size()) {
      block.resize(std::min<uint64_t>(uint64_t{1} << 20, n - at));
      train.read_back(at, block.size(), block.data());
      val.append(block.data(), block.size());
      val_bytes += count_bytes(lengths, block.data(), block.size());
    }
    train.truncate(n_train);
    train_bytes -= val_bytes;
  } else {
    val_bytes = encode_files(spec.val_files, *tokenizer, spec, lengths, val, done, total);
  }
  if (train.count() == 0 || val.count() == 0) {
    throw std::runtime_error(std::string("the corpus gives no ") +
                             (train.count() == 0 ? "train" : "val") +
                             " tokens: it is empty, or too small for data.train_fraction = " +
                             std::to_string(spec.train_fraction));
  }
  val.commit(val_bytes);
  train.commit(train_bytes);
  PreparedCorpus prepared;
  prepared.dir = dir;
  prepared.tokenizer = std::move(tokenizer);
  prepared.train = open_token_file(dir / "train.bin").split();
  prepared.val = open_token_file(dir / "val.bin").split();
  prepared.rebuilt = true;
  prepared.source_bytes = total;
  prepared.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return prepared;
}

}  // namespace

uint64_t source_fingerprint(const TokenCacheSpec& spec) {
  Fingerprint f;
  f.add_field("tinylm token cache 1");
  f.add_field(to_hex(spec.recipe_fingerprint));
  f.add_field(to_hex(fingerprint_files(spec.train_files)));
  if (spec.val_files.empty()) {
    f.add_field("fraction " + std::to_string(spec.train_fraction));
  } else {
    f.add_field("val " + to_hex(fingerprint_files(spec.val_files)));
  }
  return f.value();
}

fs::path token_cache_dir(const TokenCacheSpec& spec, const Tokenizer* fixed) {
  // Named by what defines the tokens but the files' contents: an edited corpus rebuilds its
  // own directory (no run can use its old tokens), where another corpus or recipe gets one
  // of its own.
  Fingerprint key;
  key.add_field("tinylm token cache directory 1").add_field(to_hex(spec.recipe_fingerprint));
  for (const fs::path& file : spec.train_files) key.add_field("train " + file.string());
  for (const fs::path& file : spec.val_files) key.add_field("val " + file.string());
  if (spec.val_files.empty()) key.add_field("fraction " + std::to_string(spec.train_fraction));
  const fs::path dir = spec.root / (spec.kind + "-" + to_hex(key.value()).substr(0, 12));
  if (!fixed || !fs::is_directory(dir)) return dir;
  std::unique_ptr<Tokenizer> cached;
  try {
    cached = load_tokenizer(dir);
  } catch (const std::exception&) {
    return dir;  // damaged or half made: this run may rebuild it
  }
  if (cached->fingerprint() == fixed->fingerprint()) return dir;
  return dir.string() + "-" + to_hex(fixed->fingerprint()).substr(0, 12);
}

std::string token_cache_problem(const TokenCacheSpec& spec, const Tokenizer* fixed) {
  std::unique_ptr<Tokenizer> cached;
  return cache_problem(token_cache_dir(spec, fixed), fixed, source_fingerprint(spec), cached);
}

PreparedCorpus prepare_token_cache(
    const TokenCacheSpec& spec, std::shared_ptr<const Tokenizer> fixed,
    const std::function<std::unique_ptr<Tokenizer>()>& make_tokenizer) {
  const uint64_t source_fp = source_fingerprint(spec);
  const fs::path dir = token_cache_dir(spec, fixed.get());
  // A cache directory this call makes is removed again if it fails (an empty corpus, a bad
  // tokenizer setting): a failed command leaves nothing behind.
  MadeDirectory made(dir, "the token cache (data.cache_dir)");
  const DirectoryLock lock(dir);
  std::unique_ptr<Tokenizer> cached;
  const std::string problem = spec.force ? "a rebuild was asked for (--force)"
                                         : cache_problem(dir, fixed.get(), source_fp, cached);
  if (problem.empty()) {
    made.keep();
    PreparedCorpus prepared;
    prepared.dir = dir;
    prepared.tokenizer = fixed ? fixed : std::shared_ptr<const Tokenizer>(std::move(cached));
    prepared.train = open_token_file(dir / "train.bin").split();
    prepared.val = open_token_file(dir / "val.bin").split();
    return prepared;
  }
  spdlog::info("tokenizing the corpus into {}: {}", dir.string(), problem);
  std::shared_ptr<const Tokenizer> tokenizer =
      fixed ? fixed : std::shared_ptr<const Tokenizer>(make_tokenizer());
  PreparedCorpus prepared = rebuild(spec, dir, source_fp, std::move(tokenizer));
  made.keep();
  return prepared;
}

TokenSplit encode_corpus_in_memory(const Tokenizer& tokenizer, const fs::path& path,
                                   const std::string& origin) {
  std::vector<int64_t> ids;
  uint64_t bytes = 0;
  const std::vector<uint32_t> lengths = byte_lengths(tokenizer);
  for (const fs::path& file : corpus_files(path, origin)) {
    std::string text;
    CorpusReader reader({file}, size_t{1} << 24);
    CorpusReader::Chunk chunk;
    while (reader.next(chunk)) text += chunk.text;
    const std::vector<int64_t> file_ids = tokenizer.encode(text, file.string());
    bytes += count_bytes(lengths, file_ids.data(), file_ids.size());
    ids.insert(ids.end(), file_ids.begin(), file_ids.end());
  }
  if (ids.empty())
    throw std::runtime_error("corpus " + path.string() + " (" + origin + ") is empty");
  return {TokenSequence::from_ids(std::move(ids)), bytes};
}

TokenSplit encode_in_memory(const Tokenizer& tokenizer, std::string_view text,
                            std::string_view source) {
  std::vector<int64_t> ids = tokenizer.encode(text, source);
  const uint64_t bytes = count_bytes(byte_lengths(tokenizer), ids.data(), ids.size());
  return {TokenSequence::from_ids(std::move(ids)), bytes};
}

}  // namespace tinylm
