"""The fixed extension of benchmarks/build_speed.py: two .cu files with torch headers and a
binding, built with torch's BuildExtension, as real packages are."""

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

setup(
    name="speedpkg",
    version="1.0",
    ext_modules=[
        CUDAExtension(
            "speedpkg._C",
            ["csrc/binding.cpp", "csrc/elementwise.cu", "csrc/reduce.cu"],
            extra_compile_args={"cxx": ["-O2"], "nvcc": ["-O2"]},
        )
    ],
    cmdclass={"build_ext": BuildExtension},
)
