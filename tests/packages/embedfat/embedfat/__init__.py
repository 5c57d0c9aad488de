"""Kernels held as data: ``names()`` lists them, ``load(name)`` loads one with the driver API
(``cuModuleLoadData``) and returns its CUresult (0: loaded). Importing touches no GPU."""

from embedfat._C_cuda import load, names

__all__ = ["load", "names"]
