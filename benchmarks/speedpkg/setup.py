"""The fixed extension of benchmarks/build_speed.py: two .cu files with torch headers and a
binding, built with torch's BuildExtension, as real packages are. SPEEDPKG_CU (a comma list,
default both) builds a subset: ``--cu elementwise.cu`` is the one-.cu shape of the issue's
real package."""

import os

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

CU = os.environ.get("SPEEDPKG_CU", "elementwise.cu,reduce.cu").split(",")

setup(
    name="speedpkg",
    version="1.0",
    ext_modules=[
        CUDAExtension(
            "speedpkg._C",
            ["csrc/binding.cpp", *(f"csrc/{name}" for name in CU)],
            define_macros=[(f"SPEEDPKG_{name.split('.')[0].upper()}", "1") for name in CU],
            extra_compile_args={"cxx": ["-O2"], "nvcc": ["-O2"]},
        )
    ],
    cmdclass={"build_ext": BuildExtension},
)
