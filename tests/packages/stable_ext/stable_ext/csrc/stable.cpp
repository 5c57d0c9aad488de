// A torch extension written against torch's stable C ABI only (torch/csrc/stable,
// STABLE_TORCH_LIBRARY), compiled for TORCH_TARGET_VERSION 2.10 and Python's limited API:
// one wheel per CUDA major serves torch 2.10 and later and every Python from 3.10.
#include <Python.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>

using torch::stable::Tensor;

Tensor copy_of(Tensor t) { return torch::stable::clone(t); }

STABLE_TORCH_LIBRARY(stable_ext, m) { m.def("copy_of(Tensor t) -> Tensor"); }

STABLE_TORCH_LIBRARY_IMPL(stable_ext, CompositeExplicitAutograd, m) {
  m.impl("copy_of", TORCH_BOX(&copy_of));
}

extern "C" PyObject* PyInit__C(void) {
  static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_C", NULL, -1, NULL};
  return PyModule_Create(&module);
}
