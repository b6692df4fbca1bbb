#pragma once
// A JSON document as one exact string, for a checksum that Python recomputes: compact, keys
// sorted, what json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
// writes. nlohmann's own dump() agrees but for some floats: both print the shortest digits
// that read back to the double, but where two are equally near (a float32 loss widened,
// 3.66190338134765625: ...562 or ...563) Python's repr rounds to even and nlohmann's Grisu2
// may not. Here a float is Python's repr: the shortest round-trip digits (std::to_chars,
// ties to even), fixed notation for exponents -4 to 15 ("3.0", "0.0001"), else "d.ddde+XX".
// NaN and infinities are null, as nlohmann writes them to the file.

#include <nlohmann/json.hpp>
#include <string>

namespace tinylm {

std::string canonical_json(const nlohmann::json& doc);

// One double as Python's repr() writes it ("3.0", "1e-05", "1.5e+16").
std::string python_float_repr(double value);

}  // namespace tinylm
