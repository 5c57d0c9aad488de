// Excerpt of tilelang/src/tl_templates/cuda/common.h from tilelang 0.1.15; see PROVENANCE.
// TL_CUDA_ARCH_TCGEN05_ENABLED from __CUDA_ARCH_FEAT_SM1xx_ALL or __CUDA_ARCH_FAMILY_SPECIFIC__ == 1000/1010/1030/1100; add2 by arch and nvcc version.
#define TL_DEVICE __forceinline__ __device__
// [trimmed]
#if defined(__CUDA_ARCH_FEAT_SM100_ALL) ||                                     \
    defined(__CUDA_ARCH_FEAT_SM101_ALL) ||                                     \
    defined(__CUDA_ARCH_FEAT_SM103_ALL) ||                                     \
    defined(__CUDA_ARCH_FEAT_SM110_ALL) ||                                     \
    (defined(__CUDA_ARCH_FAMILY_SPECIFIC__) &&                                 \
     ((__CUDA_ARCH_FAMILY_SPECIFIC__ == 1000) ||                               \
      (__CUDA_ARCH_FAMILY_SPECIFIC__ == 1010) ||                               \
      (__CUDA_ARCH_FAMILY_SPECIFIC__ == 1030) ||                               \
      (__CUDA_ARCH_FAMILY_SPECIFIC__ == 1100)))
#define TL_CUDA_ARCH_TCGEN05_ENABLED
#endif
// [trimmed]
// --- add2 ----------------------------------------------------------------

TL_DEVICE float2 add2(float2 a, float2 b) {
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 1000) &&                       \
    ((__CUDACC_VER_MAJOR__ > 12) ||                                            \
     (__CUDACC_VER_MAJOR__ == 12 && __CUDACC_VER_MINOR__ >= 8))
  return __fadd2_rn(a, b);
#else
  return make_float2(a.x + b.x, a.y + b.y);
#endif
}

TL_DEVICE __nv_bfloat162 add2(__nv_bfloat162 a, __nv_bfloat162 b) {
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 800)
  return __hadd2(a, b);
#else
  return __nv_bfloat162{__hadd(a.x, b.x), __hadd(a.y, b.y)};
#endif
}

TL_DEVICE __half2 add2(__half2 a, __half2 b) {
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 530)
  return __hadd2(a, b);
#else
  return __half2{__hadd(a.x, b.x), __hadd(a.y, b.y)};
#endif
}
