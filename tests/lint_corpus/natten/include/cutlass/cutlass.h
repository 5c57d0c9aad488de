// Excerpt of cutlass/cutlass.h (CUTLASS 4.3.5 as vendored in NATTEN 0.21.7), trimmed for archguard's lint corpus; see PROVENANCE.
// cutlass/cutlass.h: includes the helper macros.
#pragma once

#include "cutlass/detail/helper_macros.hpp"
// [trimmed]
