"""A setup.py that drives CMake with ``find_package(Torch)``, as many torch CUDA packages do:
torch's CMake files (``Caffe2/public/cuda.cmake``) run ``FindCUDA`` and
``find_package(CUDAToolkit)``, which need one toolkit root with ``bin/nvcc``, ``include/``
and ``lib64/``; the project links cuBLAS, which an nvcc-only toolkit lacks and torch's
NVIDIA wheels have. Like most such files it passes ``CMAKE_ARGS`` on to CMake."""

import os
import shlex
import subprocess
from pathlib import Path

import torch.utils
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class CMakeExtension(Extension):
    def __init__(self, name: str) -> None:
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext: Extension) -> None:
        out = Path(self.get_ext_fullpath(ext.name)).resolve()
        build = Path(self.build_temp).resolve() / ext.name
        build.mkdir(parents=True, exist_ok=True)
        source = Path(__file__).resolve().parent
        subprocess.run(
            ["cmake", "-S", str(source), "-B", str(build), "-G", "Ninja",
             f"-DCMAKE_PREFIX_PATH={torch.utils.cmake_prefix_path}",
             f"-DOUT_DIR={out.parent}", f"-DOUT_NAME={out.name}",
             *shlex.split(os.environ.get("CMAKE_ARGS", ""))],
            check=True,
        )
        subprocess.run(["cmake", "--build", str(build)], check=True)


setup(
    name="cmaketorch",
    version="1.0",
    packages=[],
    ext_modules=[CMakeExtension("cmaketorch_k")],
    cmdclass={"build_ext": CMakeBuild},
)
