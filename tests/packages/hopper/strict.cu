// A kernel that only assembles for sm_90a: code for __CUDA_ARCH__ == 900 uses setmaxnreg,
// which ptxas rejects for plain sm_90 ("Instruction 'setmaxnreg.inc' not supported on
// .target 'sm_90'"). A build that turns the package's sm_90a into sm_90 fails.
__global__ void strict_scale(float* x, int n) {
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ == 900)
  asm volatile("setmaxnreg.inc.sync.aligned.u32 240;\n" ::);
#endif
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= 2.0f;
}

void strict_launch(float* x, int n) { strict_scale<<<(n + 127) / 128, 128>>>(x, n); }
