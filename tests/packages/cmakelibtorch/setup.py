"""A setup.py that runs ``cmake`` (configure, then build) itself on a project that does
``list(APPEND CMAKE_PREFIX_PATH $ENV{LIBTORCH_PATH})`` and ``find_package(Torch REQUIRED)``,
as real ones do (issue 58). It never names torch's CMake files itself: it hands its own
``LIBTORCH_PATH`` to CMake where one is set, else nothing. Not torch imported, no torch
headers compiled: the kernel is plain CUDA (nvcc takes seconds)."""

import os
import shlex
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
        libtorch = os.environ.get("LIBTORCH_PATH", "")
        args = ["cmake", "-S", str(source), "-B", str(build)]
        args += [f"-DOUT_DIR={out.parent}", f"-DOUT_NAME={out.name}"]
        if libtorch:
            args.append(f"-DLIBTORCH_PATH={libtorch}")
        args += shlex.split(os.environ.get("CMAKE_ARGS", ""))
        subprocess.run(args, check=True)
        subprocess.run(["cmake", "--build", str(build)], check=True)


setup(
    name="cmakelibtorch",
    version="1.0",
    packages=[],
    ext_modules=[CMakeExtension("cmakelibtorch_k")],
    cmdclass={"build_ext": CMakeBuild},
)
