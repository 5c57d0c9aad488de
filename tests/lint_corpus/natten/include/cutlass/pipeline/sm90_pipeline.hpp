// Excerpt of cutlass/pipeline/sm90_pipeline.hpp (CUTLASS 4.3.5 as vendored in NATTEN 0.21.7), trimmed for archguard's lint corpus; see PROVENANCE.
// cutlass/pipeline/sm90_pipeline.hpp: includes cutlass/arch/barrier.h.
#pragma once
// [trimmed]
#include "cutlass/cutlass.h"
#include "cutlass/arch/barrier.h"
// [trimmed]
