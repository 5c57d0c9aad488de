"""A plain torch extension setup: archguard needs no changes here.

The setuptools hook of torch-archguard (listed in build-system.requires) wraps
BuildExtension, puts the resolved -gencode flags on the nvcc line and records the
resolution in the wheel.
"""

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

setup(
    ext_modules=[
        CUDAExtension(
            name="archguard_example._C",
            sources=[
                "src/archguard_example/csrc/binding.cpp",
                "src/archguard_example/csrc/scale.cu",
                "src/archguard_example/csrc/fp8.cu",
            ],
            extra_compile_args={"cxx": ["-O2"], "nvcc": ["-O2", "--threads", "2"]},
        )
    ],
    cmdclass={"build_ext": BuildExtension},
)
