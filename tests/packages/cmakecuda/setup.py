"""A setup.py that drives CMake, as many CUDA packages do: setuptools never sees a .cu source
or an nvcc flag; CMake picks the arches from CUDAARCHS (its default for
CMAKE_CUDA_ARCHITECTURES), which archguard sets for the build."""

import subprocess
from pathlib import Path

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
             f"-DOUT_DIR={out.parent}", f"-DOUT_NAME={out.name}"],
            check=True,
        )
        subprocess.run(["cmake", "--build", str(build)], check=True)


setup(
    name="cmakecuda",
    version="1.0",
    packages=[],
    ext_modules=[CMakeExtension("cmakecuda_k")],
    cmdclass={"build_ext": CMakeBuild},
)
