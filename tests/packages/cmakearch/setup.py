"""A setup.py that drives CMake and passes its own arch variable to it, as many do
(``-DCMAKE_CUDA_ARCHITECTURES=`` on CMake's command line wins over ``CUDAARCHS``): its
default, 75;80, is not what a farm's list asks. archguard sets CUDA_ARCHS to the effective
list in CMake's spelling, learnt from that default."""

import os
import subprocess
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

CUDA_ARCHS = os.environ.get("CUDA_ARCHS", "75;80")


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
             f"-DCMAKE_CUDA_ARCHITECTURES={CUDA_ARCHS}",
             f"-DOUT_DIR={out.parent}", f"-DOUT_NAME={out.name}"],
            check=True,
        )
        subprocess.run(["cmake", "--build", str(build)], check=True)


setup(
    name="cmakearch",
    version="1.0",
    packages=[],
    ext_modules=[CMakeExtension("cmakearch_k")],
    cmdclass={"build_ext": CMakeBuild},
)
