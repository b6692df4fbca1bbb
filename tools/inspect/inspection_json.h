#pragma once
// The output boundary of `tinylm inspect`: its typed views (tools/inspect/inspection.h) as one JSON
// document, format "tinylm-inspect/1" (docs/FORMATS.md). Heatmaps (every [layer][head]
// T x T table) are written by an encoder: spelled out as nested arrays for --json, packed
// as bytes for the HTML report (tools/inspect/html_report.h).

#include <functional>

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "tools/inspect/inspection.h"

namespace tinylm {

// values (L, nh, rows, cols); `unit`: values in [0, 1] (patterns), else scaled per head.
using HeatmapEncoder = std::function<nlohmann::json(const torch::Tensor& values, bool unit)>;

// Nested arrays, 4 decimals.
nlohmann::json spelled_out_heatmap(const torch::Tensor& values, bool unit);

nlohmann::json inspection_json(const Inspection& inspection, const LoadedRun& run,
                               const HeatmapEncoder& heatmap = spelled_out_heatmap);

// Nested arrays of a tensor of any shape, rounded to `decimals`.
nlohmann::json tensor_to_json(const torch::Tensor& t, int decimals);

}  // namespace tinylm
