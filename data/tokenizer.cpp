#include "data/tokenizer.h"

#include <algorithm>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "data/char_tokenizer.h"
#include "data/corpus.h"
#include "data/gpt2_tokenizer.h"
#include "data/io/atomic_file.h"
#include "data/io/files.h"
#include "data/io/fingerprint.h"
#include "data/sentencepiece_tokenizer.h"
#include "data/utf8.h"

namespace tinylm {
namespace fs = std::filesystem;

void Tokenizer::check_id(int64_t id) const {
  if (id < 0 || id >= vocab_size()) {
    throw std::runtime_error("token id " + std::to_string(id) + " is outside the vocabulary of " +
                             std::to_string(vocab_size()));
  }
}

size_t Tokenizer::cut_point(std::string_view text) const { return after_last_newline(text); }

std::string Tokenizer::token_label(int64_t id) const {
  const std::string bytes = token_bytes(id);
  std::string label;
  std::string_view rest = bytes;
  while (!rest.empty()) {
    const size_t bad = find_invalid_utf8(rest);
    if (bad == std::string_view::npos) {
      label += rest;
      break;
    }
    label += rest.substr(0, bad);
    char hex[8];
    std::snprintf(hex, sizeof hex, "<0x%02X>", static_cast<unsigned char>(rest[bad]));
    label += hex;
    rest.remove_prefix(bad + 1);
  }
  return label;
}

namespace {

class ByteTokenizer : public Tokenizer {
 public:
  TokenizerKind kind() const override { return TokenizerKind::kByte; }
  int64_t vocab_size() const override { return 256; }
  std::vector<int64_t> encode(std::string_view text, std::string_view) const override {
    std::vector<int64_t> ids(text.size());
    for (size_t i = 0; i < text.size(); ++i) ids[i] = static_cast<unsigned char>(text[i]);
    return ids;
  }
  std::string decode(const std::vector<int64_t>& ids) const override {
    std::string text;
    text.reserve(ids.size());
    for (int64_t id : ids) text += token_bytes(id);
    return text;
  }
  std::string token_bytes(int64_t id) const override {
    check_id(id);
    return std::string(1, static_cast<char>(id));
  }
  void save(const fs::path& dir) const override {
    write_file_atomic(dir / "tokenizer.json", nlohmann::json{{"type", kind_name()}}.dump() + "\n");
  }
  uint64_t fingerprint() const override { return Fingerprint().add("byte").value(); }
  std::string describe() const override { return "bytes, 256 ids"; }
};

}  // namespace

std::unique_ptr<Tokenizer> make_byte_tokenizer() { return std::make_unique<ByteTokenizer>(); }

std::unique_ptr<Tokenizer> load_tokenizer(const fs::path& dir) {
  const fs::path path = dir / "tokenizer.json";
  if (!fs::exists(path)) throw std::runtime_error(path.string() + " is missing");
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(read_file(path));
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(path.string() + " is not valid JSON (" + e.what() +
                             "): the file is truncated or corrupted");
  }
  if (!doc.is_object() || !doc.contains("type") || !doc["type"].is_string()) {
    throw std::runtime_error(path.string() + ": expected an object with a string \"type\"");
  }
  const std::string type = doc["type"];
  const auto names = enum_names(TokenizerKind{});
  const auto named = std::find(names.begin(), names.end(), type);
  if (named == names.end()) {
    std::string all;
    for (const char* name : names) all += std::string(all.empty() ? "" : ", ") + name;
    throw std::runtime_error(path.string() + ": tokenizer type \"" + type + "\" is not one of " +
                             all);
  }
  const auto kind = static_cast<TokenizerKind>(named - names.begin());
  if (kind == TokenizerKind::kChar)
    return std::make_unique<CharTokenizer>(CharTokenizer::from_json(doc, path.string()));
  if (kind == TokenizerKind::kByte) return make_byte_tokenizer();
  if (kind == TokenizerKind::kSentencePiece) {
    const std::string model = doc.value("model", std::string("tokenizer.model"));
    if (model.find('/') != std::string::npos) {
      throw std::runtime_error(path.string() + ": \"model\" must name a file beside it");
    }
    auto tokenizer = SentencePieceTokenizer::from_file(dir / model);
    if (doc.contains("fingerprint") && doc["fingerprint"] != to_hex(tokenizer->fingerprint())) {
      throw std::runtime_error((dir / model).string() + " is not the model " + path.string() +
                               " was written with (it was replaced or damaged)");
    }
    return tokenizer;
  }
  // TokenizerKind::kGpt2
  {
    const auto beside = [&](const char* key, const char* fallback) {
      const std::string name = doc.value(key, std::string(fallback));
      if (name.find('/') != std::string::npos) {
        throw std::runtime_error(path.string() + ": \"" + key + "\" must name a file beside it");
      }
      return dir / name;
    };
    auto tokenizer =
        Gpt2Tokenizer::from_files(beside("vocab", "vocab.json"), beside("merges", "merges.txt"));
    if (doc.contains("fingerprint") && doc["fingerprint"] != to_hex(tokenizer->fingerprint())) {
      throw std::runtime_error("vocab.json and merges.txt in " + dir.string() + " are not those " +
                               path.string() + " was written with (replaced or damaged)");
    }
    return tokenizer;
  }
}

}  // namespace tinylm
