// The canonical JSON of state.json's checksum against what Python's json.dumps(doc,
// sort_keys=True, separators=(",", ":"), ensure_ascii=False) writes: worked examples, each
// string as Python 3.11 prints it.

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "data/io/canonical_json.h"

namespace tinylm {
namespace {

TEST(CanonicalJson, FloatsAreWrittenAsPythonsRepr) {
  const std::vector<std::pair<double, std::string>> cases = {
      {3.66190338134765625, "3.6619033813476562"},  // halfway: rounded to even
      {3.0, "3.0"},
      {100.0, "100.0"},
      {-0.0, "-0.0"},
      {0.1, "0.1"},
      {0.30000000000000004, "0.30000000000000004"},
      {1234.5678, "1234.5678"},
      {0.0001, "0.0001"},  // exponent -4: still fixed
      {1e-05, "1e-05"},    // -5: scientific, two exponent digits at least
      {2.5e-05, "2.5e-05"},
      {-7.25e-07, "-7.25e-07"},
      {9999999999999998.0, "9999999999999998.0"},  // exponent 15: still fixed
      {1e16, "1e+16"},
      {1.5e16, "1.5e+16"},
      {123456789012345680.0, "1.2345678901234568e+17"},
      {1.5e300, "1.5e+300"},
      {5e-324, "5e-324"},  // the smallest subnormal
  };
  for (const auto& [value, python] : cases) EXPECT_EQ(python_float_repr(value), python) << python;
  EXPECT_EQ(python_float_repr(std::numeric_limits<double>::quiet_NaN()), "null");
  EXPECT_EQ(python_float_repr(-std::numeric_limits<double>::infinity()), "null");
}

TEST(CanonicalJson, IsCompactWithSortedKeysAndPythonsEscapes) {
  const nlohmann::json doc = nlohmann::json::parse(
      R"({"b": [1, 2.5, true, null], "a": {"z": "tab\tquote\"é", "y": -3}, "c": 1e-7})");
  EXPECT_EQ(canonical_json(doc),
            "{\"a\":{\"y\":-3,\"z\":\"tab\\tquote\\\"é\"},\"b\":[1,2.5,true,null],\"c\":1e-07}");
}

}  // namespace
}  // namespace tinylm
