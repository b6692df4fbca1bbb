#pragma once
// A tensor shape as errors write it: "(65, 16)"; a 1-D shape is "(48)".

#include <string>

#include <c10/util/ArrayRef.h>

namespace tinylm {

inline std::string shape_text(c10::IntArrayRef sizes) {
  std::string s = "(";
  for (size_t i = 0; i < sizes.size(); ++i) s += (i ? ", " : "") + std::to_string(sizes[i]);
  return s + ")";
}

}  // namespace tinylm
