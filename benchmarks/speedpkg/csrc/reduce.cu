// The benchmark's second kernel file: a row reduction, also with torch headers.
#include <c10/cuda/CUDAStream.h>
#include <torch/extension.h>

template <typename scalar_t>
__global__ void row_norm_kernel(const scalar_t* __restrict__ x, float* __restrict__ out,
                                int64_t rows, int64_t cols) {
  int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  float acc = 0.f;
  for (int64_t c = 0; c < cols; ++c) {
    float v = static_cast<float>(x[r * cols + c]);
    acc += v * v;
  }
  out[r] = sqrtf(acc);
}

torch::Tensor row_norm(const torch::Tensor& x) {
  TORCH_CHECK(x.is_cuda() && x.dim() == 2, "row_norm: x must be a 2-D CUDA tensor");
  auto xc = x.contiguous();
  auto out = torch::empty({xc.size(0)}, xc.options().dtype(torch::kFloat32));
  const int threads = 128;
  const int blocks = static_cast<int>((xc.size(0) + threads - 1) / threads);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, xc.scalar_type(), "row_norm", [&] {
    row_norm_kernel<scalar_t><<<blocks, threads, 0, c10::cuda::getCurrentCUDAStream().stream()>>>(
        xc.data_ptr<scalar_t>(), out.data_ptr<float>(), xc.size(0), xc.size(1));
  });
  return out;
}
