from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

TARGET = "-DTORCH_TARGET_VERSION=0x020a000000000000"  # torch 2.10
LIMITED = "-DPy_LIMITED_API=0x030A0000"  # Python 3.10

setup(
    ext_modules=[
        CUDAExtension(
            "stable_ext._C",
            ["stable_ext/csrc/stable.cpp", "stable_ext/csrc/kernel.cu"],
            extra_compile_args={"cxx": [TARGET, LIMITED], "nvcc": [TARGET]},
            py_limited_api=True,
        )
    ],
    cmdclass={"build_ext": BuildExtension},
    options={"bdist_wheel": {"py_limited_api": "cp310"}},
)
