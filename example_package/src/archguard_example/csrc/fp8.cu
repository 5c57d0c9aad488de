// The example's FP8-style kernel: its fast path needs Ada (8.9: FP8 conversions in
// hardware), and every older arch compiles a trapping fallback, as real FP8 packages do.
// A host dispatch that checks "capability >= 8.9" would launch it on an L4 (8.9), which,
// with no sm_89 cubin in the wheel, loads the sm_86 cubin: the trap. `archguard lint` and
// `archguard verify --stubs` say so; a package with this kernel declares 8.9.
#include <cuda_fp8.h>
#include <cuda_runtime.h>

namespace {

__global__ void fp8_roundtrip_kernel(const float* __restrict__ x, float* __restrict__ y,
                                     long n) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  long i = static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) {
    __nv_fp8_e4m3 q(x[i]);  // round to FP8 (e4m3) and back
    y[i] = static_cast<float>(q);
  }
#else
  __trap();  // no FP8 path for this arch
#endif
}

}  // namespace

cudaError_t archguard_example_fp8_roundtrip(const float* x, float* y, long n,
                                            cudaStream_t stream) {
  if (n == 0) {
    return cudaSuccess;
  }
  const int threads = 256;
  const long blocks = (n + threads - 1) / threads;
  fp8_roundtrip_kernel<<<static_cast<unsigned>(blocks), threads, 0, stream>>>(x, y, n);
  return cudaGetLastError();
}
