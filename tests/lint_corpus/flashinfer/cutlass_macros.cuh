// Excerpt of flashinfer/data/cutlass (CUTLASS vendored in flashinfer-python 0.7.4); see PROVENANCE.
// The macros grid_dependency_control.cu's guards use: CUDA_ARCH_FAMILY(X) is (false) without an a/f target.
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
// --- cutlass/arch/barrier.h (written for the corpus: section label) ---
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && (__CUDACC_VER_MAJOR__ >= 12)
#define CUDA_BARRIER_ENABLED 1
#else
#define CUDA_BARRIER_ENABLED 0
#endif
