// Excerpt of cutlass/platform/platform.h (CUTLASS 4.3.5 as vendored in NATTEN 0.21.7), trimmed for archguard's lint corpus; see PROVENANCE.
// cutlass/platform/platform.h: includes cutlass.h, defines CUTLASS_CLANG_CUDA only for clang (config.h's `!CUTLASS_CLANG_CUDA`).
#pragma once
// [trimmed]
#include <cutlass/cutlass.h>
// [trimmed]
#if defined(__clang__) && defined(__CUDA__)
#define CUTLASS_CLANG_CUDA 1
#endif
// [trimmed]
