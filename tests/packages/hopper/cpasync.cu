// An Ampere kernel with no guard: cp.async exists from sm_80 on, and ptxas stops for any
// older target ("Feature 'cp.async' requires .target sm_80 or higher"). A package that
// hard-codes only sm_80 and up states its floor that way; adding sm_75 breaks it.
__global__ void copy_async(const float* src, float* dst, int n) {
  __shared__ float buf[128];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  unsigned smem = static_cast<unsigned>(__cvta_generic_to_shared(&buf[threadIdx.x]));
  if (i < n) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(smem), "l"(src + i));
    asm volatile("cp.async.wait_all;\n" ::);
    dst[i] = buf[threadIdx.x];
  }
}

void cpasync_launch(const float* s, float* d, int n) { copy_async<<<(n + 127) / 128, 128>>>(s, d, n); }
