#pragma once
// The self-contained HTML report of `tinylm inspect --html`: the page in tools/inspect/report/
// (compiled into the binary) with the inspection's JSON inlined, made with pack_heatmaps
// as its heatmap encoder: bytes (0-255 between a per-head low and high, base64), so that
// 12 layers x 12 heads x 256 tokens stay a few MB and draw fast. No network: it opens from
// file://.

#include <string>

#include <torch/torch.h>
#include <nlohmann/json.hpp>

namespace tinylm {

// `doc`: inspection_json(..., pack_heatmaps) (tools/inspect/inspection_json.h).
std::string html_report(const nlohmann::json& doc);

// The report's page with `data` (JSON text, "null" for none yet) inlined and `tail` (markup)
// at the end of its body: the live lab's page is this with no data and its script.
std::string report_page(const std::string& data, const std::string& tail);

// {"shape": [L, nh, R, C], "lo": [...], "hi": [...], "b64": "..."} for values (L, nh, R, C).
nlohmann::json pack_heatmaps(const torch::Tensor& values, bool unit);

std::string base64(const uint8_t* bytes, size_t size);

}  // namespace tinylm
