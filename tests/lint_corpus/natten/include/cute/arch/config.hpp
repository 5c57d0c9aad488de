// Excerpt of cute/arch/config.hpp (CUTLASS 4.3.5 as vendored in NATTEN 0.21.7), trimmed for archguard's lint corpus; see PROVENANCE.
// cute/arch/config.hpp: CUTE_ARCH_FFMA2_SM100_ENABLED from CUTLASS_ARCH_MMA_SM100_ENABLED (__CUDA_ARCH__ == 1000, plain targets too).
#pragma once

#include <cutlass/arch/config.h> // CUTLASS_ARCH_MMA_SMxx_ENABLED
// [trimmed]

// {add, mul, fma}.f32x2 PTX
#if defined(CUTLASS_ARCH_MMA_SM100_ENABLED) || defined(CUTLASS_ARCH_MMA_SM100A_ENABLED)
   // Enable CuTe MMA Atoms
#  define CUTE_ARCH_FFMA2_SM100_ENABLED
   // Enable f32x2 PTX generation
#  define CUTE_ARCH_FLOAT2_MATH_ENABLED
#endif
// [trimmed]
