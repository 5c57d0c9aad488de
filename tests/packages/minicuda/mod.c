/* A Python module with no torch binding: the tests read its device code, never run it. */
#include <Python.h>

static struct PyModuleDef minicuda_module = {PyModuleDef_HEAD_INIT, "_minicuda", NULL, -1, NULL};

PyMODINIT_FUNC PyInit__minicuda(void) { return PyModule_Create(&minicuda_module); }
