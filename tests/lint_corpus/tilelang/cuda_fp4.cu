// Excerpt of tilelang/src/tl_templates/cuda/cuda_fp4.h from tilelang 0.1.15; see PROVENANCE.
// Inside `>= 800`: a pure nvcc-version guard (__CUDACC_VER_MAJOR__ >= 13) and stochastic rounding only under __CUDA_ARCH_FEAT_SM100_ALL/SM103_ALL.
#include "common.cuh" // written for the corpus: the original includes "common.h"
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 800)
// [trimmed]
// fp4_e2m1 -> half
TL_DEVICE __half __tl_cvt_fp4_to_half(const __nv_fp4_storage_t src) {
#if __CUDACC_VER_MAJOR__ >= 13
  __half_raw raw = __nv_cvt_fp4_to_halfraw(src, __NV_E2M1);
#else
  __half_raw raw = __tl_cvt_fp4_to_halfraw_naive(src, __NV_E2M1);
#endif
  __half result;
  result = *reinterpret_cast<__half *>(&raw);
  return result;
}
// [trimmed]
// Full 4-element version (float4 input)
template <bool kDependentFalse = false>
TL_DEVICE __nv_fp4x4_storage_t
__tl_cvt_f32x4_to_e2m1x4_rs_sat(float4 src, unsigned int rbits) {
#if defined(__CUDA_ARCH_FEAT_SM100_ALL) || defined(__CUDA_ARCH_FEAT_SM103_ALL)
  __nv_fp4x4_storage_t result;
  asm("cvt.rs.satfinite.e2m1x4.f32 %0, {%1, %2, %3, %4}, %5;"
      : "=h"(result)
      : "f"(src.w), "f"(src.z), "f"(src.y), "f"(src.x), "r"(rbits));
  return result;
#else
  static_assert(kDependentFalse,
                "Stochastic rounding f32-to-FP4 requires sm_100a or sm_103a");
  return {};
#endif
}
// [trimmed]
#endif
