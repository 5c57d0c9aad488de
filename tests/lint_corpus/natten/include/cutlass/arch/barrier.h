// Excerpt of cutlass/arch/barrier.h (CUTLASS 4.3.5 as vendored in NATTEN 0.21.7), trimmed for archguard's lint corpus; see PROVENANCE.
// cutlass/arch/barrier.h: includes cutlass/arch/config.h.
#pragma once
#include "cutlass/cutlass.h"
// [trimmed]
#include <cutlass/arch/config.h>        
// [trimmed]
