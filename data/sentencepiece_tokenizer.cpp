#include "data/sentencepiece_tokenizer.h"

#include <dlfcn.h>

#include <cstdlib>
#include <regex>
#include <stdexcept>

#include <spdlog/fmt/fmt.h>
#include <nlohmann/json.hpp>

#include "data/io/atomic_file.h"
#include "data/io/files.h"
#include "data/io/fingerprint.h"
#include "data/sentencepiece_api.h"

namespace tinylm {
namespace fs = std::filesystem;

namespace {

constexpr const char* kLibraryName = "libtinylm_sentencepiece.so";

// The wrapper library's functions, looked up once.
struct Library {
  std::string path;
  decltype(&tinylm_spm_load) load;
  decltype(&tinylm_spm_destroy) destroy;
  decltype(&tinylm_spm_vocab_size) vocab_size;
  decltype(&tinylm_spm_encode) encode;
  decltype(&tinylm_spm_decode) decode;
  decltype(&tinylm_spm_piece) piece;
  decltype(&tinylm_spm_score) score;
  decltype(&tinylm_spm_train) train;
  decltype(&tinylm_spm_free) free;
};

std::vector<fs::path> library_candidates() {
  if (const char* env = std::getenv("TINYLM_SENTENCEPIECE_LIBRARY"); env && *env) {
    return {fs::path(env)};  // the user's choice, and nothing else
  }
  std::vector<fs::path> candidates;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    candidates.push_back(exe.parent_path() / kLibraryName);
    candidates.push_back(exe.parent_path() / ".." / kLibraryName);
    candidates.push_back(exe.parent_path() / ".." / "lib" / kLibraryName);
  }
#ifdef TINYLM_SENTENCEPIECE_LIBRARY_DEFAULT
  candidates.emplace_back(TINYLM_SENTENCEPIECE_LIBRARY_DEFAULT);
#endif
  return candidates;
}

Library open_library() {
  std::string tried;
  for (const fs::path& candidate : library_candidates()) {
    if (!fs::exists(candidate)) {
      tried += "\n  " + candidate.string() + " (not there)";
      continue;
    }
    // RTLD_DEEPBIND: the library and SentencePiece resolve their symbols (protobuf's above
    // all) in their own dependencies first, not in LibTorch's. AddressSanitizer refuses
    // DEEPBIND (it would bypass its interceptors), so a sanitizer build goes without.
#ifdef TINYLM_SANITIZE
    constexpr int kOwnSymbolsFirst = 0;
#else
    constexpr int kOwnSymbolsFirst = RTLD_DEEPBIND;
#endif
    void* handle = ::dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL | kOwnSymbolsFirst);
    if (!handle) {
      tried += "\n  " + candidate.string() + " (" + ::dlerror() + ")";
      continue;
    }
    Library lib;
    lib.path = candidate.lexically_normal().string();
    const auto get = [&](auto& function, const char* name) {
      function = reinterpret_cast<std::decay_t<decltype(function)>>(::dlsym(handle, name));
      if (!function) {
        throw std::runtime_error(lib.path + " lacks " + name +
                                 ": it is from another version of tinylm; rebuild it");
      }
    };
    get(lib.load, "tinylm_spm_load");
    get(lib.destroy, "tinylm_spm_destroy");
    get(lib.vocab_size, "tinylm_spm_vocab_size");
    get(lib.encode, "tinylm_spm_encode");
    get(lib.decode, "tinylm_spm_decode");
    get(lib.piece, "tinylm_spm_piece");
    get(lib.score, "tinylm_spm_score");
    get(lib.train, "tinylm_spm_train");
    get(lib.free, "tinylm_spm_free");
    return lib;
  }
  throw std::runtime_error(
      std::string("cannot load ") + kLibraryName +
      ", which tinylm needs for SentencePiece tokenizers. Tried:" + tried +
      "\nBuild it (`make build`), or set TINYLM_SENTENCEPIECE_LIBRARY to its path");
}

const Library& library() {
  static const Library lib = open_library();  // an exception leaves it to be retried
  return lib;
}

// Takes ownership of a message the library allocated.
std::string take_error(char* error) {
  std::string message = error ? error : "unknown error";
  library().free(error);
  return message;
}

// SentencePiece writes a space as U+2581.
const std::string kSpaceMark = "\xE2\x96\x81";

}  // namespace

struct SentencePieceTokenizer::Handle {
  tinylm_spm* model = nullptr;
  ~Handle() {
    if (model) library().destroy(model);
  }
};

SentencePieceTokenizer::SentencePieceTokenizer(std::string model, std::unique_ptr<Handle> handle)
    : model_(std::move(model)), handle_(std::move(handle)) {
  vocab_size_ = library().vocab_size(handle_->model);
  bytes_of_.resize(static_cast<size_t>(vocab_size_));
  std::regex byte_piece("<0x([0-9A-Fa-f]{2})>");
  for (int id = 0; id < vocab_size_; ++id) {
    int kind = 0;
    std::string piece = library().piece(handle_->model, id, &kind);
    std::smatch match;
    std::string& bytes = bytes_of_[static_cast<size_t>(id)];
    if (kind == TINYLM_SPM_BYTE && std::regex_match(piece, match, byte_piece)) {
      bytes = std::string(1, static_cast<char>(std::stoi(match[1].str(), nullptr, 16)));
    } else if (kind == TINYLM_SPM_CONTROL) {
      bytes.clear();
      if (piece == "<s>") bos_id_ = id;
    } else if (kind == TINYLM_SPM_UNKNOWN) {
      bytes = " \xE2\x81\x87 ";  // what SentencePiece decodes an unknown piece as
    } else {
      for (size_t at = piece.find(kSpaceMark); at != std::string::npos;
           at = piece.find(kSpaceMark, at + 1)) {
        piece.replace(at, kSpaceMark.size(), " ");
      }
      bytes = piece;
    }
  }
}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

std::unique_ptr<SentencePieceTokenizer> SentencePieceTokenizer::from_bytes(std::string model,
                                                                           std::string source) {
  auto handle = std::make_unique<Handle>();
  char* error = nullptr;
  if (library().load(model.data(), model.size(), &handle->model, &error) != 0) {
    throw std::runtime_error(source + " is not a SentencePiece model (" + take_error(error) +
                             "); it may be corrupted or another kind of file");
  }
  return std::unique_ptr<SentencePieceTokenizer>(
      new SentencePieceTokenizer(std::move(model), std::move(handle)));
}

std::unique_ptr<SentencePieceTokenizer> SentencePieceTokenizer::from_file(const fs::path& path) {
  if (!fs::is_regular_file(path)) {
    throw std::runtime_error("SentencePiece model not found: " + path.string());
  }
  return from_bytes(read_file(path), path.string());
}

std::vector<int64_t> SentencePieceTokenizer::encode(std::string_view text,
                                                    std::string_view source) const {
  int32_t* ids = nullptr;
  size_t count = 0;
  char* error = nullptr;
  if (library().encode(handle_->model, text.data(), text.size(), &ids, &count, &error) != 0) {
    throw std::runtime_error("cannot encode " + std::string(source) + ": " + take_error(error));
  }
  std::vector<int64_t> out(ids, ids + count);
  library().free(ids);
  return out;
}

std::string SentencePieceTokenizer::decode(const std::vector<int64_t>& ids) const {
  std::vector<int32_t> in(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    check_id(ids[i]);
    in[i] = static_cast<int32_t>(ids[i]);
  }
  char* text = nullptr;
  size_t size = 0;
  char* error = nullptr;
  if (library().decode(handle_->model, in.data(), in.size(), &text, &size, &error) != 0) {
    throw std::runtime_error("cannot decode tokens: " + take_error(error));
  }
  std::string out(text, size);
  library().free(text);
  return out;
}

std::string SentencePieceTokenizer::token_bytes(int64_t id) const {
  check_id(id);
  return bytes_of_[static_cast<size_t>(id)];
}

std::string SentencePieceTokenizer::piece(int64_t id) const {
  check_id(id);
  int kind = 0;
  return library().piece(handle_->model, static_cast<int>(id), &kind);
}

float SentencePieceTokenizer::score(int64_t id) const {
  check_id(id);
  return library().score(handle_->model, static_cast<int>(id));
}

void SentencePieceTokenizer::save(const fs::path& dir) const {
  write_file_atomic(dir / "tokenizer.model", model_);
  const nlohmann::json doc = {{"type", kind_name()},
                              {"model", "tokenizer.model"},
                              {"vocab_size", vocab_size_},
                              {"fingerprint", to_hex(fingerprint())}};
  write_file_atomic(dir / "tokenizer.json", doc.dump(2) + "\n");
}

uint64_t SentencePieceTokenizer::fingerprint() const {
  return Fingerprint().add("sentencepiece").add(model_).value();
}

std::string SentencePieceTokenizer::describe() const {
  return "sentencepiece, " + std::to_string(vocab_size_) + " pieces";
}

namespace {

struct LineSource {
  const std::function<bool(std::string&)>* next;
  std::string line;
  bool failed = false;
  std::string error;
};

extern "C" int next_training_line(void* context, const char** text, size_t* size) {
  auto* source = static_cast<LineSource*>(context);
  try {
    if (!(*source->next)(source->line)) return 0;
  } catch (const std::exception& e) {
    source->failed = true;
    source->error = e.what();
    return -1;
  }
  *text = source->line.data();
  *size = source->line.size();
  return 1;
}

// SentencePiece's complaints, in the words of tinylm's config.
std::string explain_training_error(const std::string& message, const SentencePieceTraining& o,
                                   const std::string& corpus) {
  std::smatch m;
  if (std::regex_search(message, m,
                        std::regex(R"(Vocabulary size (?:is )?too high \((\d+)\).*<= (\d+))"))) {
    return "data.vocab_size = " + m[1].str() + " is more than " + corpus +
           " supports: SentencePiece can make at most " + m[2].str() +
           " pieces from this text. Set [data] vocab_size to " + m[2].str() +
           " or less, or train on more text";
  }
  if (std::regex_search(message, m,
                        std::regex(R"(smaller than required_chars\. (\d+) vs (\d+))"))) {
    return "data.vocab_size = " + m[1].str() + " is too small: " + corpus + " has " + m[2].str() +
           " distinct characters (with data.character_coverage = " +
           fmt::format("{:g}", o.character_coverage) +
           ") and each needs a piece. Raise [data] vocab_size, or lower data.character_coverage";
  }
  return "training the SentencePiece tokenizer on " + corpus + " failed: " + message;
}

}  // namespace

std::unique_ptr<SentencePieceTokenizer> train_sentencepiece(
    const SentencePieceTraining& o, const std::function<bool(std::string& line)>& next_line,
    const std::string& corpus) {
  std::string symbols;
  for (const std::string& s : o.user_defined_symbols) {
    if (s.empty() || s.find(',') != std::string::npos) {
      throw std::runtime_error("data.user_defined_symbols: \"" + s +
                               "\" must be non-empty and contain no comma");
    }
    symbols += (symbols.empty() ? "" : ",") + s;
  }
  const std::vector<std::pair<std::string, std::string>> options = {
      {"model_type", o.model_type},
      {"vocab_size", std::to_string(o.vocab_size)},
      {"character_coverage", std::to_string(o.character_coverage)},
      {"byte_fallback", o.byte_fallback ? "true" : "false"},
      {"user_defined_symbols", symbols},
      // Keep text exactly as written, so that decode(encode(text)) == text.
      {"normalization_rule_name", "identity"},
      {"remove_extra_whitespaces", "false"},
      {"add_dummy_prefix", "false"},
      {"input_sentence_size", std::to_string(o.max_sentences)},
      {"shuffle_input_sentence", "true"},
      {"max_sentence_length", "65536"},
      {"num_threads", std::to_string(std::max(1, o.threads))},
      {"minloglevel", "2"}  // its errors come back as a status; its warnings are noise,
  };
  std::vector<const char*> keys, values;
  for (const auto& [key, value] : options) {
    keys.push_back(key.c_str());
    values.push_back(value.c_str());
  }
  LineSource source{&next_line, {}, false, {}};
  char* model = nullptr;
  size_t size = 0;
  char* error = nullptr;
  const int status = library().train(keys.data(), values.data(), keys.size(), next_training_line,
                                     &source, &model, &size, &error);
  if (source.failed) {
    if (status != 0) library().free(error);
    throw std::runtime_error(source.error);
  }
  if (status != 0) throw std::runtime_error(explain_training_error(take_error(error), o, corpus));
  std::string bytes(model, size);
  library().free(model);
  return SentencePieceTokenizer::from_bytes(std::move(bytes), "the tokenizer trained on " + corpus);
}

}  // namespace tinylm
