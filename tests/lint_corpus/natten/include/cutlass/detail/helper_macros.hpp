// Excerpt of cutlass/detail/helper_macros.hpp (CUTLASS 4.3.5 as vendored in NATTEN 0.21.7), trimmed for archguard's lint corpus; see PROVENANCE.
// CUDA_ARCH_CONDITIONAL / CUDA_ARCH_FAMILY / CUDA_ARCH_CONDITIONAL_OR_FAMILY: (false) without an a/f target.
#pragma once
// [trimmed]
// __CUDA_ARCH_SPECIFIC__ is introduced in CUDA 12.9
#if !defined(CUDA_ARCH_CONDITIONAL)

#if defined(__CUDA_ARCH_SPECIFIC__)
#define CUDA_ARCH_CONDITIONAL(ARCH_XXYY) (__CUDA_ARCH_SPECIFIC__ == ARCH_XXYY)
#else
#define CUDA_ARCH_CONDITIONAL(ARCH_XXYY) (false)
#endif

#endif

// __CUDA_ARCH_FAMILY_SPECIFIC__ is introduced in CUDA 12.9
#if !defined(CUDA_ARCH_FAMILY)

#if defined(__CUDA_ARCH_FAMILY_SPECIFIC__)
#define CUDA_ARCH_FAMILY(ARCH_XXYY) (__CUDA_ARCH_FAMILY_SPECIFIC__ == ARCH_XXYY)
#else
#define CUDA_ARCH_FAMILY(ARCH_XXYY) (false)
#endif

#endif

#if !defined(CUDA_ARCH_CONDITIONAL_OR_FAMILY)
#define CUDA_ARCH_CONDITIONAL_OR_FAMILY(ARCH_XXYY) \
  (CUDA_ARCH_CONDITIONAL(ARCH_XXYY) || CUDA_ARCH_FAMILY(ARCH_XXYY))
#endif
// [trimmed]
