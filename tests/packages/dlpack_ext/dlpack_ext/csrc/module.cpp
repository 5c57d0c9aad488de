// A torch extension that calls into torch's C++ ABI: at::toDLPackNonOwning(const Tensor&,
// DLTensor*), which torch 2.14 changed to take a `bool read_only = false` as well (source
// compatible, ABI incompatible). Built on torch 2.13, it imports there and fails on 2.14
// with "undefined symbol: _ZN2at17toDLPackNonOwningERKNS_6TensorEP8DLTensor".
#include <Python.h>

#include <ATen/DLConvertor.h>

extern "C" int dlpack_ext_ndim(const at::Tensor* tensor) {
  DLTensor view;
  at::toDLPackNonOwning(*tensor, &view);
  return view.ndim;
}

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_C", NULL, -1, NULL};

PyMODINIT_FUNC PyInit__C(void) { return PyModule_Create(&module); }
