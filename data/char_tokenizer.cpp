#include "data/char_tokenizer.h"

#include <algorithm>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "data/io/atomic_file.h"
#include "data/io/fingerprint.h"
#include "data/utf8.h"

namespace tinylm {

CharTokenizer::CharTokenizer(std::vector<char32_t> vocab) : vocab_(std::move(vocab)) {
  if (vocab_.empty()) throw std::runtime_error("tokenizer vocabulary is empty");
  for (size_t i = 0; i < vocab_.size(); ++i) {
    const char32_t cp = vocab_[i];
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
      throw std::runtime_error("tokenizer vocabulary entry " + std::to_string(i) +
                               " is not a Unicode scalar value");
    }
    if (i > 0 && vocab_[i - 1] >= cp) {
      throw std::runtime_error("tokenizer vocabulary is not sorted and unique at entry " +
                               std::to_string(i) + " " + describe_code_point(cp));
    }
  }
  id_of_.assign(static_cast<size_t>(vocab_.back()) + 1, -1);
  for (size_t i = 0; i < vocab_.size(); ++i) id_of_[vocab_[i]] = static_cast<int32_t>(i);
}

CharTokenizer CharTokenizer::from_text(std::string_view text) {
  std::vector<char32_t> cps = decode_utf8(text, "the corpus");
  std::sort(cps.begin(), cps.end());
  cps.erase(std::unique(cps.begin(), cps.end()), cps.end());
  return CharTokenizer(std::move(cps));
}

CharTokenizer CharTokenizer::from_json(const nlohmann::json& doc, std::string_view source) {
  const std::string where(source);
  if (!doc.is_object() || !doc.contains("type") || !doc["type"].is_string()) {
    throw std::runtime_error(where + ": expected an object with a string \"type\"");
  }
  if (doc["type"] != "char") {
    throw std::runtime_error(where + ": tokenizer type \"" + doc["type"].get<std::string>() +
                             "\" is not supported (expected \"char\")");
  }
  if (!doc.contains("vocab") || !doc["vocab"].is_array()) {
    throw std::runtime_error(where + ": expected a \"vocab\" array of strings");
  }
  std::vector<char32_t> vocab;
  for (size_t i = 0; i < doc["vocab"].size(); ++i) {
    const auto& entry = doc["vocab"][i];
    if (!entry.is_string()) {
      throw std::runtime_error(where + ": vocab entry " + std::to_string(i) + " is not a string");
    }
    const std::vector<char32_t> cps = decode_utf8(entry.get_ref<const std::string&>(),
                                                  where + " vocab entry " + std::to_string(i));
    if (cps.size() != 1) {
      throw std::runtime_error(where + ": vocab entry " + std::to_string(i) +
                               " must be exactly one character");
    }
    vocab.push_back(cps[0]);
  }
  try {
    return CharTokenizer(std::move(vocab));
  } catch (const std::exception& e) {
    throw std::runtime_error(where + ": " + e.what());
  }
}

nlohmann::json CharTokenizer::to_json() const {
  nlohmann::json vocab = nlohmann::json::array();
  for (char32_t cp : vocab_) {
    std::string s;
    append_utf8(s, cp);
    vocab.push_back(s);
  }
  return {{"type", kind_name()}, {"vocab", vocab}};
}

std::vector<int64_t> CharTokenizer::encode(std::string_view text, std::string_view source) const {
  const std::vector<char32_t> cps = decode_utf8(text, source);
  std::vector<int64_t> ids(cps.size());
  size_t line = 1, column = 1;
  for (size_t i = 0; i < cps.size(); ++i) {
    const char32_t cp = cps[i];
    const int32_t id = cp < id_of_.size() ? id_of_[cp] : -1;
    if (id < 0) {
      throw std::runtime_error("character " + describe_code_point(cp) + " at position " +
                               std::to_string(i) + " (line " + std::to_string(line) + ", column " +
                               std::to_string(column) + ") of " + std::string(source) +
                               " is not in the tokenizer's vocabulary of " +
                               std::to_string(vocab_.size()) + " characters");
    }
    ids[i] = id;
    if (cp == '\n') {
      ++line, column = 1;
    } else {
      ++column;
    }
  }
  return ids;
}

std::string CharTokenizer::token_bytes(int64_t id) const {
  check_id(id);
  std::string s;
  append_utf8(s, vocab_[static_cast<size_t>(id)]);
  return s;
}

std::string CharTokenizer::decode(const std::vector<int64_t>& ids) const {
  std::string out;
  out.reserve(ids.size());
  for (int64_t id : ids) out += token_bytes(id);
  return out;
}

void CharTokenizer::save(const std::filesystem::path& dir) const {
  write_file_atomic(dir / "tokenizer.json", to_json().dump() + "\n");
}

uint64_t CharTokenizer::fingerprint() const { return Fingerprint().add(to_json().dump()).value(); }

std::string CharTokenizer::describe() const {
  return "characters, " + std::to_string(vocab_.size()) + " ids";
}

}  // namespace tinylm
