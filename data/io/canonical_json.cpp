#include "data/io/canonical_json.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <system_error>

namespace tinylm {

std::string python_float_repr(double value) {
  if (!std::isfinite(value)) return "null";
  // The shortest digits that read back to value, in scientific form: "-d.ddde+XX".
  char buffer[64];
  const auto [end, error] =
      std::to_chars(buffer, buffer + sizeof buffer, value, std::chars_format::scientific);
  if (error != std::errc()) return "null";  // 64 bytes always suffice for a double
  const std::string scientific(buffer, end);
  const size_t e = scientific.find('e');
  const int exponent = std::atoi(scientific.c_str() + e + 1);
  const bool negative = scientific[0] == '-';
  std::string digits;
  for (size_t i = negative ? 1 : 0; i < e; ++i) {
    if (scientific[i] != '.') digits += scientific[i];
  }
  std::string out = negative ? "-" : "";
  if (exponent < -4 || exponent >= 16) {
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    out += exponent < 0 ? "e-" : "e+";
    const std::string magnitude = std::to_string(std::abs(exponent));
    return out + (magnitude.size() < 2 ? "0" : "") + magnitude;
  }
  if (exponent < 0)
    return out + "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
  const size_t whole = static_cast<size_t>(exponent) + 1;
  if (digits.size() <= whole) return out + digits + std::string(whole - digits.size(), '0') + ".0";
  return out + digits.substr(0, whole) + "." + digits.substr(whole);
}

std::string canonical_json(const nlohmann::json& doc) {
  switch (doc.type()) {
    case nlohmann::json::value_t::object: {
      // nlohmann keeps keys sorted bytewise; UTF-8 sorts as code points, as Python's does.
      std::string out = "{";
      for (auto it = doc.begin(); it != doc.end(); ++it) {
        if (out.size() > 1) out += ",";
        out += nlohmann::json(it.key()).dump() + ":" + canonical_json(it.value());
      }
      return out + "}";
    }
    case nlohmann::json::value_t::array: {
      std::string out = "[";
      for (const auto& item : doc) {
        if (out.size() > 1) out += ",";
        out += canonical_json(item);
      }
      return out + "]";
    }
    case nlohmann::json::value_t::number_float: return python_float_repr(doc.get<double>());
    default:  // strings (escaped as Python's ensure_ascii=False does), integers, true, null
      return doc.dump();
  }
}

}  // namespace tinylm
