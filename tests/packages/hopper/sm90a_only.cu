// A CUTLASS-style Hopper kernel (CUTE_INVALID_CONTROL_PATH's shape): the real path only
// where __CUDA_ARCH_FEAT_SM90_ALL is defined (sm_90a), an error print and a trap in every
// other image. An H100 loading a plain sm_90 cubin runs the trap: "ERROR : Arch conditional
// MMA instruction used without targeting appropriate compute capability. Aborting."
#include <cstdio>

__global__ void sm90a_scale(float* x, int n) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= 2.0f;
#else
  printf("ERROR : Arch conditional MMA instruction used without targeting appropriate "
         "compute capability. Aborting.\n");
  __trap();
#endif
}

void sm90a_launch(float* x, int n) { sm90a_scale<<<(n + 127) / 128, 128>>>(x, n); }
