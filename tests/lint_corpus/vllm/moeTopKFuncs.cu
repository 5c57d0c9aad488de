// Excerpt of csrc/moe/moeTopKFuncs.cuh from vllm 0.34.0; see PROVENANCE.
// `#ifdef __CUDA_ARCH__` sets only `static constexpr bool kHAS_FAST_REDUX = (__CUDA_ARCH__ / 100) >= 10`; read by `if constexpr` in the same device function.
namespace vllm {
namespace moe {
namespace reduce_topk {
namespace cg = cooperative_groups;
static constexpr int kWARP_SIZE = 32;

template <typename T_>
struct TopKRedType {
  using T = T_;
  static_assert(
      std::is_same_v<T, float> || std::is_same_v<T, half> ||
          std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, int>,
      "Top K reduction only implemented for int, float, float16 and bfloat16");

  using TypeCmp = std::conditional_t<sizeof(T) == 4, uint64_t, uint32_t>;

  static constexpr int kMoveBits = (sizeof(T) == 4) ? 32 : 16;
// [trimmed]
  __device__ inline TypeCmp reduce(
      cg::thread_block_tile<kWARP_SIZE> const& warp) {
#ifdef __CUDA_ARCH__
    static constexpr bool kHAS_FAST_REDUX = (__CUDA_ARCH__ / 100) >= 10;
#else
    static constexpr bool kHAS_FAST_REDUX = false;
#endif
    if constexpr (!kHAS_FAST_REDUX) {
      return cg::reduce(warp, compVal, cg::greater<TypeCmp>{});
    } else if constexpr (sizeof(TypeCmp) == 8) {
      uint32_t hi = static_cast<uint32_t>(compVal >> 32);
      uint32_t lo = static_cast<uint32_t>(compVal & 0xffffffffu);
      uint32_t maxHi;
      asm volatile("redux.sync.max.u32 %0, %1, 0xffffffff;\n"
                   : "=r"(maxHi)
                   : "r"(hi));
      uint32_t loContrib = hi == maxHi ? lo : 0u;
      uint32_t maxLo;
      asm volatile("redux.sync.max.u32 %0, %1, 0xffffffff;\n"
                   : "=r"(maxLo)
                   : "r"(loContrib));
      return (static_cast<TypeCmp>(maxHi) << 32) | static_cast<TypeCmp>(maxLo);
    } else {
      TypeCmp result;
      asm volatile("redux.sync.max.u32 %0, %1, 0xffffffff;\n"
                   : "=r"(result)
                   : "r"(compVal));
      return result;
    }
  }
};
// [trimmed]
template <int K, typename Type>
__forceinline__ __device__ void reduceTopK(
    cg::thread_block_tile<kWARP_SIZE> const& warp, Type (&out)[K],
    int32_t (&outIdx)[K], Type value, int32_t idx, Type const minValue,
    int actualK = K) {
  static_assert(K > 0, "Top K must have K > 0");
  static_assert(K < kWARP_SIZE, "Top K must have K < kWARP_SIZE");
  using RedType = TopKRedType<Type>;
  RedType topK{value, idx};
  typename RedType::TypeCmp packedMax{};
#pragma unroll
  for (int kk = 0; kk < actualK; ++kk) {
    topK = kk > 0 && packedMax == topK.compVal ? RedType{minValue, idx} : topK;
    packedMax = topK.reduce(warp);
    RedType::unpack(out[kk], outIdx[kk], packedMax);
  }
};
// [trimmed]
