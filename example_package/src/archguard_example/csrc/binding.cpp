// The torch binding: compiled once by the host compiler, whatever the arch list.
#include <c10/cuda/CUDAStream.h>
#include <torch/extension.h>

cudaError_t archguard_example_scale(const float* x, float* y, long n, float alpha,
                                    cudaStream_t stream);
cudaError_t archguard_example_fp8_roundtrip(const float* x, float* y, long n,
                                            cudaStream_t stream);

torch::Tensor scale(const torch::Tensor& x, double alpha) {
  TORCH_CHECK(x.is_cuda(), "scale: x must be a CUDA tensor");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "scale: x must be float32");
  auto xc = x.contiguous();
  auto y = torch::empty_like(xc);
  auto err = archguard_example_scale(xc.data_ptr<float>(), y.data_ptr<float>(), xc.numel(),
                                     static_cast<float>(alpha),
                                     c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == cudaSuccess, "scale: kernel launch failed: ", cudaGetErrorString(err));
  return y;
}

torch::Tensor fp8_roundtrip(const torch::Tensor& x) {
  TORCH_CHECK(x.is_cuda(), "fp8_roundtrip: x must be a CUDA tensor");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "fp8_roundtrip: x must be float32");
  int device = 0, major = 0, minor = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
  TORCH_CHECK(major * 10 + minor >= 89, "fp8_roundtrip: needs compute capability 8.9 or newer");
  auto xc = x.contiguous();
  auto y = torch::empty_like(xc);
  auto err = archguard_example_fp8_roundtrip(xc.data_ptr<float>(), y.data_ptr<float>(),
                                             xc.numel(),
                                             c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == cudaSuccess, "fp8_roundtrip: kernel launch failed: ",
              cudaGetErrorString(err));
  return y;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("scale", &scale, "y = alpha * x on the GPU");
  m.def("fp8_roundtrip", &fp8_roundtrip, "x rounded to FP8 (e4m3) and back, on 8.9+");
}
