#include <Python.h>

static struct PyModuleDef cext_module = {PyModuleDef_HEAD_INIT, "cext", NULL, -1, NULL};

PyMODINIT_FUNC PyInit_cext(void) { return PyModule_Create(&cext_module); }
