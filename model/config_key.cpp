#include "model/config_key.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include <nlohmann/json.hpp>

namespace tinylm {
namespace {

std::string number_text(double d) {
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char text[32];
  if (d == std::floor(d) && std::abs(d) < 1e15) {  // whole numbers in full: 100000, not 1e+05
    std::snprintf(text, sizeof text, "%.0f", d);
    return text;
  }
  for (int precision = 1; precision <= 17; ++precision) {  // the shortest exact form
    std::snprintf(text, sizeof text, "%.*g", precision, d);
    if (std::strtod(text, nullptr) == d) break;
  }
  return text;
}

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

}  // namespace

bool Accepts::accepts(const ConfigValue& value) const {
  if (check && !check(value)) return false;
  if (const auto* s = std::get_if<std::string>(&value)) {
    return choices.empty() || std::find(choices.begin(), choices.end(), *s) != choices.end();
  }
  double x = 0.0;
  if (const auto* i = std::get_if<int64_t>(&value)) {
    x = static_cast<double>(*i);
  } else if (const auto* d = std::get_if<double>(&value)) {
    if (!std::isfinite(*d)) return false;  // NaN passes every comparison: refuse it first
    x = *d;
  } else {
    return true;
  }
  if (min && (min_open ? x <= *min : x < *min)) return false;
  if (max && (max_open ? x >= *max : x > *max)) return false;
  return true;
}

std::string Accepts::requirement() const {
  if (!rule.empty()) return "must be " + rule;
  if (!choices.empty()) return "must be one of " + joined(choices);
  if (min && max) return "must be in " + summary();
  if (min) return std::string("must be ") + (min_open ? "> " : ">= ") + number_text(*min);
  if (max) return std::string("must be ") + (max_open ? "< " : "<= ") + number_text(*max);
  return "";
}

std::string Accepts::summary() const {
  if (!rule.empty()) return rule;
  if (!choices.empty()) return joined(choices);
  if (!min && !max) return "";
  return (min_open || !min ? "(" : "[") + (min ? number_text(*min) : "-inf") + ", " +
         (max ? number_text(*max) : "inf") + (max_open || !max ? ")" : "]");
}

Accepts anything() { return {}; }

Accepts at_least(double min) {
  Accepts a;
  a.min = min;
  return a;
}

Accepts above(double min) {
  Accepts a = at_least(min);
  a.min_open = true;
  return a;
}

Accepts between(double lo, double hi, const char* ends) {
  Accepts a;
  a.min = lo;
  a.max = hi;
  a.min_open = ends[0] == '(';
  a.max_open = ends[1] == ')';
  return a;
}

Accepts rule(std::string words, std::function<bool(const ConfigValue&)> check) {
  Accepts a;
  a.rule = std::move(words);
  a.check = std::move(check);
  return a;
}

std::string check_number_text(const Accepts& accepts, const std::string& text, bool whole) {
  std::optional<ConfigValue> value;
  const char* begin = text.data();
  const char* end = begin + text.size();
  if (whole) {
    int64_t i = 0;
    const auto [stop, error] = std::from_chars(begin, end, i);
    if (error == std::errc() && stop == end) value = i;
  } else if (!text.empty()) {
    char* stop = nullptr;
    errno = 0;
    const double d = std::strtod(text.c_str(), &stop);
    if (errno != ERANGE && stop == text.c_str() + text.size()) value = d;
  }
  if (value && accepts.accepts(*value)) return "";
  const std::string requirement = accepts.requirement();  // "must be >= 1"
  return std::string("must be ") + (whole ? "a whole number" : "a finite number") +
         (requirement.empty() ? "" : " " + requirement.substr(8)) + " (got \"" + text + "\")";
}

namespace {

// A string as a TOML basic string: JSON's escapes are TOML's, but JSON leaves DEL (U+007F)
// bare, which TOML forbids (a config.toml with it would not load again; fuzz_config_overrides
// found it).
std::string toml_string(const std::string& text) {
  std::string out = nlohmann::json(text).dump();
  for (size_t at = out.find('\x7f'); at != std::string::npos; at = out.find('\x7f', at)) {
    out.replace(at, 1, "\\u007F");
  }
  return out;
}

}  // namespace

std::string config_value_text(const ConfigValue& value) {
  if (const auto* s = std::get_if<std::string>(&value)) return toml_string(*s);
  if (const auto* b = std::get_if<bool>(&value)) return *b ? "true" : "false";
  if (const auto* i = std::get_if<int64_t>(&value)) return std::to_string(*i);
  if (const auto* list = std::get_if<std::vector<std::string>>(&value)) {
    std::string out;  // a TOML array of strings
    for (const std::string& item : *list) out += (out.empty() ? "[" : ",") + toml_string(item);
    return out.empty() ? "[]" : out + "]";
  }
  std::string out = number_text(std::get<double>(value));
  if (out.find_first_of(".eEn") == std::string::npos) out += ".0";  // stays a float in TOML
  return out;
}

}  // namespace tinylm
