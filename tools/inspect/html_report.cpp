#include "tools/inspect/html_report.h"

#include <cstdint>
#include <stdexcept>

namespace tinylm {

// tools/inspect/report/report.html and report.js, embedded by CMake.
extern const char kReportTemplate[];
extern const char kReportScript[];

namespace {

// `page` with `marker` (which it must hold once) replaced by `text`.
std::string replaced(const std::string& page, const std::string& marker, const std::string& text) {
  const size_t at = page.find(marker);
  if (at == std::string::npos) throw std::logic_error("the report template has no " + marker);
  return page.substr(0, at) + text + page.substr(at + marker.size());
}

}  // namespace

std::string base64(const uint8_t* bytes, size_t size) {
  static const char kDigits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((size + 2) / 3 * 4);
  for (size_t i = 0; i < size; i += 3) {
    const uint32_t n = (uint32_t(bytes[i]) << 16) |
                       (i + 1 < size ? uint32_t(bytes[i + 1]) << 8 : 0) |
                       (i + 2 < size ? uint32_t(bytes[i + 2]) : 0);
    out += kDigits[(n >> 18) & 63];
    out += kDigits[(n >> 12) & 63];
    out += i + 1 < size ? kDigits[(n >> 6) & 63] : '=';
    out += i + 2 < size ? kDigits[n & 63] : '=';
  }
  return out;
}

nlohmann::json pack_heatmaps(const torch::Tensor& values, bool unit) {
  const int64_t L = values.size(0), H = values.size(1);
  torch::Tensor v = values.to(torch::kFloat32).reshape({L * H, -1});  // (L*nh, R*C)
  torch::Tensor lo, hi;
  if (unit) {
    lo = torch::zeros({L * H});
    hi = torch::ones({L * H});
  } else {
    v = torch::where(torch::isfinite(v), v, torch::zeros_like(v));
    lo = std::get<0>(v.min(1));
    hi = std::get<0>(v.max(1));
  }
  const torch::Tensor span = torch::clamp_min(hi - lo, 1e-12f);
  const torch::Tensor q = ((v - lo.unsqueeze(1)) / span.unsqueeze(1) * 255.0f)
                              .round()
                              .clamp(0, 255)
                              .to(torch::kUInt8)
                              .contiguous();
  nlohmann::json lows = nlohmann::json::array(), highs = nlohmann::json::array();
  for (int64_t i = 0; i < L * H; ++i) {
    lows.push_back(lo[i].item<float>());
    highs.push_back(hi[i].item<float>());
  }
  return {{"shape", values.sizes().vec()},
          {"lo", lows},
          {"hi", highs},
          {"b64", base64(q.data_ptr<uint8_t>(), static_cast<size_t>(q.numel()))}};
}

std::string report_page(const std::string& data, const std::string& tail) {
  std::string page = replaced(kReportTemplate, "__TINYLM_DATA__", data);
  page = replaced(page, "__TINYLM_SCRIPT__", kReportScript);
  return replaced(page, "__TINYLM_LAB__", tail);
}

std::string html_report(const nlohmann::json& doc) {
  std::string data = doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  // Inside <script>, "</script" or "<!--" in a token or a path would end or confuse the
  // element; "<" occurs only inside JSON strings, where \u003c is the same character.
  for (size_t at = data.find('<'); at != std::string::npos; at = data.find('<', at + 6)) {
    data.replace(at, 1, "\\u003c");
  }
  return report_page(data, "");
}

}  // namespace tinylm
