/* A Python module whose device code is data: nvcc's fatbins and cubins, in .rodata (one by
 * .incbin, the others as C arrays from cmake/bin2c.cmake), loaded with the driver API on
 * request. libcuda is opened by load(), never at import: the module imports without a GPU. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <string.h>

struct blob {
  const char *name;
  const unsigned char *data;
  size_t size;
};

#ifndef EMBEDFAT_CPU_ONLY
#include "blobs.h"

__asm__(".section .rodata\n"
        ".balign 16\n"
        ".globl embedfat_incbin\n.hidden embedfat_incbin\n"
        "embedfat_incbin:\n"
        ".incbin \"" FATBIN_A "\"\n"
        ".globl embedfat_incbin_end\n.hidden embedfat_incbin_end\n"
        "embedfat_incbin_end:\n"
        ".previous\n");
extern const unsigned char embedfat_incbin[], embedfat_incbin_end[];

static struct blob blobs[] = {
    {"kernel_a.fatbin", embedfat_incbin, 0},
    EMBEDFAT_ARRAYS
};
#else
static struct blob blobs[] = {{"none", NULL, 0}};
#endif

static const size_t n_blobs = sizeof blobs / sizeof blobs[0];

static const struct blob *find(PyObject *name) {
  const char *text = PyUnicode_AsUTF8(name);
  if (text == NULL) return NULL;
#ifndef EMBEDFAT_CPU_ONLY
  blobs[0].size = (size_t)(embedfat_incbin_end - embedfat_incbin);
#endif
  for (size_t i = 0; i < n_blobs; i++)
    if (blobs[i].data != NULL && strcmp(blobs[i].name, text) == 0) return &blobs[i];
  PyErr_SetObject(PyExc_KeyError, name);
  return NULL;
}

static PyObject *names(PyObject *self, PyObject *unused) {
  PyObject *out = PyList_New(0);
  for (size_t i = 0; out != NULL && i < n_blobs; i++) {
    if (blobs[i].data == NULL) continue;
    PyObject *item = PyUnicode_FromString(blobs[i].name);
    if (item == NULL || PyList_Append(out, item) < 0) Py_CLEAR(out);
    Py_XDECREF(item);
  }
  return out;
}

typedef int (*cu_int_t)(unsigned int);
typedef int (*cu_device_get_t)(int *, int);
typedef int (*cu_ctx_retain_t)(void **, int);
typedef int (*cu_ctx_set_t)(void *);
typedef int (*cu_module_load_t)(void **, const void *);

static PyObject *load(PyObject *self, PyObject *name) {
  const struct blob *blob = find(name);
  if (blob == NULL) return NULL;
  void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (cuda == NULL) return PyErr_Format(PyExc_OSError, "no CUDA driver: %s", dlerror());
  cu_int_t init = (cu_int_t)dlsym(cuda, "cuInit");
  cu_device_get_t device_get = (cu_device_get_t)dlsym(cuda, "cuDeviceGet");
  cu_ctx_retain_t retain = (cu_ctx_retain_t)dlsym(cuda, "cuDevicePrimaryCtxRetain");
  cu_ctx_set_t set_current = (cu_ctx_set_t)dlsym(cuda, "cuCtxSetCurrent");
  cu_module_load_t module_load = (cu_module_load_t)dlsym(cuda, "cuModuleLoadData");
  if (!init || !device_get || !retain || !set_current || !module_load)
    return PyErr_Format(PyExc_OSError, "the CUDA driver lacks a driver API function");
  int device = 0, rc;
  void *context = NULL, *module = NULL;
  if ((rc = init(0)) == 0 && (rc = device_get(&device, 0)) == 0 &&
      (rc = retain(&context, device)) == 0 && (rc = set_current(context)) == 0)
    rc = module_load(&module, blob->data);
  return PyLong_FromLong(rc);
}

static PyMethodDef methods[] = {
    {"names", names, METH_NOARGS, "The embedded images, by file name."},
    {"load", load, METH_O, "Load one with cuModuleLoadData; its CUresult (0: loaded)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_C_cuda", NULL, -1, methods};

PyMODINIT_FUNC PyInit__C_cuda(void) { return PyModule_Create(&module); }
