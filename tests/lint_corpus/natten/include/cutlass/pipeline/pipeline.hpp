// Excerpt of cutlass/pipeline/pipeline.hpp (CUTLASS 4.3.5 as vendored in NATTEN 0.21.7), trimmed for archguard's lint corpus; see PROVENANCE.
// cutlass/pipeline/pipeline.hpp: the kernels' way to cutlass/arch/config.h (pipeline.hpp -> sm90_pipeline.hpp -> arch/barrier.h -> arch/config.h).
#pragma once

////////////////////////////////////////////////////////////////////////////////////////////////////

#include "cutlass/pipeline/sm90_pipeline.hpp"
// [trimmed]
