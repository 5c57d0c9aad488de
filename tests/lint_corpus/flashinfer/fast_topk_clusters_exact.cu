// Excerpt of flashinfer/data/include/flashinfer/fast_topk_clusters_exact.cuh from flashinfer-python 0.7.4; see PROVENANCE.
// A host launcher's `#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900` decides which device passes instantiate the kernels.
// Cluster cooperative groups (cg::this_cluster, cluster barriers, etc.) require
// SM 9.0 (Hopper) or newer.
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
// [trimmed]
template <typename T, typename IdxT, int NClusters, bool PDL_ENABLED>
__global__ __launch_bounds__(1024) void __cluster_dims__(NClusters, 1, 1)
    fast_topk_clusters_exact_kernel(
        const T* __restrict__ logits,  // [batchsize, max_num_pages * 64]
        IdxT* __restrict__ output_indices, T* __restrict__ output_values, int seq_len,
        int* __restrict__ pre_hist, int* __restrict__ cached_overflow, int overflow_stride,
        int logit_stride, int indices_stride, int num_cached, const int TopK) {
// [trimmed]
}
// [trimmed]
#endif  // !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900

constexpr int MAX_SMEM_CARVEOUT = 227 * 1024;

#define DISPATCH_TOPK_EXACT(kernel_name, dtype, CLUSTERS, PDL) \
  if (num_clusters == CLUSTERS && pdl_enabled == PDL) {        \
    kernel = (void*)&kernel_name<dtype, CLUSTERS, PDL>;        \
  }

// Variant for kernels with an additional IdxT template parameter (index output dtype).
#define DISPATCH_TOPK_EXACT_IDX(kernel_name, dtype, idx_type, CLUSTERS, PDL) \
  if (num_clusters == CLUSTERS && pdl_enabled == PDL) {                      \
    kernel = (void*)&kernel_name<dtype, idx_type, CLUSTERS, PDL>;            \
  }
// [trimmed]
template <typename T, typename IdxT = int>
void launch_fast_topk_clusters_exact(const T* logits, IdxT* indices, T* output_values, int seq_len,
                                     int* pre_hist, int* cached_overflow, int overflow_stride,
                                     int batch_size, int logit_stride, int indices_stride,
                                     int num_cached, int num_clusters, bool pdl_enabled, int TopK,
                                     cudaStream_t stream) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
  int extern_shared_mem = get_shared_mem_bytes(TopK, num_cached);

  void* args[11] = {
      &logits,          &indices,      &output_values,  &seq_len,    &pre_hist, &cached_overflow,
      &overflow_stride, &logit_stride, &indices_stride, &num_cached, &TopK};

  void* kernel = nullptr;
  DISPATCH_TOPK_EXACT_IDX(fast_topk_clusters_exact_kernel, T, IdxT, 1, true);
  DISPATCH_TOPK_EXACT_IDX(fast_topk_clusters_exact_kernel, T, IdxT, 2, true);
  DISPATCH_TOPK_EXACT_IDX(fast_topk_clusters_exact_kernel, T, IdxT, 4, true);
  DISPATCH_TOPK_EXACT_IDX(fast_topk_clusters_exact_kernel, T, IdxT, 8, true);
  DISPATCH_TOPK_EXACT_IDX(fast_topk_clusters_exact_kernel, T, IdxT, 1, false);
  DISPATCH_TOPK_EXACT_IDX(fast_topk_clusters_exact_kernel, T, IdxT, 2, false);
  DISPATCH_TOPK_EXACT_IDX(fast_topk_clusters_exact_kernel, T, IdxT, 4, false);
  DISPATCH_TOPK_EXACT_IDX(fast_topk_clusters_exact_kernel, T, IdxT, 8, false);

  if (kernel == nullptr) {
    num_clusters = 1;
    pdl_enabled = false;
    DISPATCH_TOPK_EXACT_IDX(fast_topk_clusters_exact_kernel, T, IdxT, 1, false);
  }

  // cudaLaunchKernelExC requires an explicit cluster dimension attribute even for kernels
  // annotated with __cluster_dims__; without it the launch fails with invalid argument.
  launch_topk_cluster_kernel(kernel, args, batch_size * num_clusters, extern_shared_mem,
                             num_clusters, pdl_enabled, stream);
#else
  TVM_FFI_ICHECK(false) << "fast_topk_clusters_exact requires SM 9.0 (Hopper) or newer";
#endif
}
