#pragma once
// The views of `tinylm inspect` as tables on stdout, printed from the typed results.

#include "tools/inspect/inspection.h"

namespace tinylm {

void print_inspection(const Inspection& inspection, const LoadedRun& run);

}  // namespace tinylm
