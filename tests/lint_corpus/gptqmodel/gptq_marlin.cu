// Excerpt of gptqmodel_ext/marlin/gptq_marlin.cu from gptqmodel 7.7.0; see PROVENANCE.
// `#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 750` around HOST code: a stub entry point, #else the dispatch (`kernel = Marlin<...>`) and the `<<<>>>` launch.
#ifndef MARLIN_GEMM_EXPORT_NAME
  #define MARLIN_GEMM_EXPORT_NAME gptq_marlin_gemm
#endif
// [trimmed]
namespace marlin {

__global__ void MarlinDefault(MARLIN_KERNEL_PARAMS){};

using MarlinFuncPtr = void (*)(MARLIN_KERNEL_PARAMS);

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 750

__global__ void permute_cols_kernel(int4 const* __restrict__ a_int4_ptr,
                                    int const* __restrict__ perm_int_ptr,
                                    int4* __restrict__ out_int4_ptr, int size_m,
                                    int size_k, int lda, int block_rows) {}

}  // namespace marlin

torch::Tensor MARLIN_GEMM_EXPORT_NAME(
    torch::Tensor& a, std::optional<torch::Tensor> c_or_none,
    torch::Tensor& b_q_weight,
    std::optional<torch::Tensor> const& b_bias_or_none, torch::Tensor& b_scales,
    std::optional<torch::Tensor> const& global_scale_or_none,
    std::optional<torch::Tensor> const& b_zeros_or_none,
    std::optional<torch::Tensor> const& g_idx_or_none,
    std::optional<torch::Tensor> const& perm_or_none, torch::Tensor& workspace,
    vllm::ScalarTypeId const& b_q_type_id, int64_t size_m, int64_t size_n,
    int64_t size_k, bool is_k_full, bool use_atomic_add, bool use_fp32_reduce,
    bool is_zp_float, std::optional<torch::Tensor> c_tmp_or_none,
    std::optional<torch::Tensor> a_tmp_or_none) {
  TORCH_CHECK_NOT_IMPLEMENTED(false,
                              "marlin_gemm(..) requires CUDA_ARCH >= 7.5");
  return torch::empty({1, 1});
}

#else

// For a given "a" of size [M,K] performs a permutation of the K columns based
// on the given "perm" indices.
__global__ void permute_cols_kernel(int4 const* __restrict__ a_int4_ptr,
                                    int const* __restrict__ perm_int_ptr,
                                    int4* __restrict__ out_int4_ptr, int size_m,
                                    int size_k, int lda, int block_rows) {
// [trimmed]
}
// [trimmed]
  #define _GET_IF(W_TYPE, THREAD_M_BLOCKS, THREAD_N_BLOCKS, THREAD_K_BLOCKS,   \
                  M_BLOCK_SIZE_8, STAGES, GROUP_BLOCKS, NUM_THREADS,           \
                  IS_ZP_FLOAT)                                                 \
    else if (q_type == W_TYPE && thread_m_blocks == THREAD_M_BLOCKS &&         \
             thread_n_blocks == THREAD_N_BLOCKS &&                             \
             thread_k_blocks == THREAD_K_BLOCKS &&                             \
             m_block_size_8 == M_BLOCK_SIZE_8 &&                               \
             stages == STAGES && group_blocks == GROUP_BLOCKS &&               \
             num_threads == NUM_THREADS &&                                     \
             is_zp_float == IS_ZP_FLOAT) {                                     \
      constexpr bool kIsStage2FourBitTile =                                    \
          STAGES == 2 &&                                                       \
          (W_TYPE == vllm::kU4 || W_TYPE == vllm::kU4B8 ||                     \
           W_TYPE == vllm::kFE2M1f);                                           \
      constexpr bool kIsSupportedStage2Tile =                                  \
          !kIsStage2FourBitTile ||                                             \
          THREAD_M_BLOCKS * 2 <= THREAD_K_BLOCKS;                              \
      if constexpr (kIsSupportedStage2Tile) {                                  \
        constexpr auto S_TYPE =                                                \
            W_TYPE == vllm::kFE2M1f                                            \
                ? (GROUP_BLOCKS == 1 ? vllm::kFE4M3fn : vllm::kFE8M0fnu)       \
                : ((W_TYPE == vllm::kFE4M3fn && GROUP_BLOCKS == 2)             \
                       ? vllm::kFE8M0fnu                                       \
                       : (std::is_same<scalar_t, half>::value                  \
                              ? vllm::kFloat16                                 \
                              : vllm::kBFloat16));                             \
        kernel = Marlin<scalar_t, W_TYPE.id(), S_TYPE.id(), NUM_THREADS,       \
                        THREAD_M_BLOCKS, THREAD_N_BLOCKS, THREAD_K_BLOCKS,     \
                        M_BLOCK_SIZE_8, STAGES, GROUP_BLOCKS, IS_ZP_FLOAT>;    \
      }                                                                        \
    }

  // COMMON: cases for (group_blocks in [-1, 2, 4, 8] and is_zp_float == false)
// [trimmed]
  #define COMMON_GET_IF_M1(W_TYPE, N_BLOCKS, K_BLOCKS, NUM_THREADS, STAGES) \
    _GET_IF(W_TYPE, 1, N_BLOCKS, K_BLOCKS, true, STAGES, -1, NUM_THREADS,   \
            false)                                                           \
    _GET_IF(W_TYPE, 1, N_BLOCKS, K_BLOCKS, true, STAGES, 2, NUM_THREADS,    \
            false)                                                           \
    _GET_IF(W_TYPE, 1, N_BLOCKS, K_BLOCKS, true, STAGES, 4, NUM_THREADS,    \
            false)                                                           \
    _GET_IF(W_TYPE, 1, N_BLOCKS, K_BLOCKS, true, STAGES, 8, NUM_THREADS,    \
            false)                                                           \
    _GET_IF(W_TYPE, 1, N_BLOCKS, K_BLOCKS, false, STAGES, -1, NUM_THREADS,  \
            false)                                                           \
    _GET_IF(W_TYPE, 1, N_BLOCKS, K_BLOCKS, false, STAGES, 2, NUM_THREADS,   \
            false)                                                           \
    _GET_IF(W_TYPE, 1, N_BLOCKS, K_BLOCKS, false, STAGES, 4, NUM_THREADS,   \
            false)                                                           \
    _GET_IF(W_TYPE, 1, N_BLOCKS, K_BLOCKS, false, STAGES, 8, NUM_THREADS,   \
            false)
// [trimmed]
  #define COMMON_GET_IF(W_TYPE, STAGES)              \
    COMMON_GET_IF_M1(W_TYPE, 8, 8, 256, STAGES)      \
    COMMON_GET_IF_M1(W_TYPE, 8, 4, 128, STAGES)      \
    COMMON_GET_IF_M1(W_TYPE, 4, 8, 128, STAGES)      \
    COMMON_GET_IF_M234(W_TYPE, 16, 4, 256, STAGES)   \
    COMMON_GET_IF_M234(W_TYPE, 8, 4, 128, STAGES)    \
    COMMON_GET_IF_M234(W_TYPE, 4, 8, 128, STAGES)
// [trimmed]
template <typename scalar_t>
MarlinFuncPtr get_marlin_kernel(const vllm::ScalarType q_type,
                                int thread_m_blocks, int thread_n_blocks,
                                int thread_k_blocks, bool m_block_size_8,
                                bool has_act_order, bool has_zp,
                                int group_blocks, int num_threads,
                                bool is_zp_float, int stages) {
  int num_bits = q_type.size_bits();
  auto kernel = MarlinDefault;
  if constexpr (std::is_same<scalar_t, half>::value) {
    if (stages == 2) {
      if (false) {
      }
      COMMON_GET_IF(vllm::kU4, 2)
      COMMON_GET_IF(vllm::kU8, 2)
      COMMON_GET_IF(vllm::kU4B8, 2)
      COMMON_GET_IF(vllm::kU8B128, 2)
// [trimmed]

  return kernel;
}
// [trimmed]
template <typename scalar_t>
void marlin_mm(const void* A, const void* B, void* C, void* C_tmp, void* b_bias,
// [trimmed]
    auto kernel = get_marlin_kernel<scalar_t>(
        q_type, thread_m_blocks, thread_n_blocks, thread_k_blocks,
        m_block_size_8, has_act_order, has_zp, group_blocks, num_threads,
        is_zp_float, stages);
// [trimmed]
    cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         max_shared_mem_new);
// [trimmed]
    kernel<<<blocks, num_threads, max_shared_mem_new, stream>>>(
        A_ptr, B_ptr, C_ptr, C_tmp_ptr, bias_ptr, s_ptr, s2_ptr, zp_ptr,
        g_idx_ptr, num_groups,
        prob_m_split, prob_n, prob_k, lda, locks, has_bias, part_use_atomic_add,
        use_fp32_reduce, max_shared_mem_new);
// [trimmed]
  }
}

}  // namespace marlin

torch::Tensor MARLIN_GEMM_EXPORT_NAME(
// [trimmed]
    marlin::marlin_mm<half>(
// [trimmed]
  return c;
}
// [trimmed]
#endif
