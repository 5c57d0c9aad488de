// The torch binding of the build-speed benchmark's extension, for the .cu files built
// (setup.py defines SPEEDPKG_<FILE> for each).
#include <torch/extension.h>

#ifdef SPEEDPKG_ELEMENTWISE
torch::Tensor fused_scale_bias(const torch::Tensor& x, double alpha, double beta);
torch::Tensor gelu(const torch::Tensor& x);
torch::Tensor softmax_rows(const torch::Tensor& x);
#endif
#ifdef SPEEDPKG_REDUCE
torch::Tensor row_norm(const torch::Tensor& x);
#endif

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
#ifdef SPEEDPKG_ELEMENTWISE
  m.def("fused_scale_bias", &fused_scale_bias, "y = alpha * x + beta");
  m.def("gelu", &gelu, "tanh-approximated GELU");
  m.def("softmax_rows", &softmax_rows, "softmax over each row of a 2-D tensor");
#endif
#ifdef SPEEDPKG_REDUCE
  m.def("row_norm", &row_norm, "the L2 norm of each row");
#endif
}
