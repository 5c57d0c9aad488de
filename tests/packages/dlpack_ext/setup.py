from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

setup(
    ext_modules=[
        CUDAExtension(
            "dlpack_ext._C",
            ["dlpack_ext/csrc/module.cpp", "dlpack_ext/csrc/kernel.cu"],
        )
    ],
    cmdclass={"build_ext": BuildExtension},
)
