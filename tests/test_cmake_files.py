# ruff: noqa: E501 (real build-log lines, quoted whole)
"""archguard.frontend.cmake: the lines of a package's CMake files that choose CUDA arches
themselves, and CMake's own words in a build log (the CMake text is as real projects write
it; the log lines are CMake 3.25's and torch 2.13's, copied from real builds here)."""

from __future__ import annotations

from pathlib import Path

from archguard.frontend.cmake import cmake_error, forced_arches, forced_note, no_cuda_said
from archguard.frontend.failures import cause

# morphottention 0.2.1's CMakeLists.txt (released sdist), its arch line
MORPH = "set(CMAKE_CUDA_ARCHITECTURES 90 100 120)\n"


def write(tree: Path, name: str, text: str) -> None:
    path = tree / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_each_line_that_forces_arches_is_named_and_a_guarded_default_is_not(
    tmp_path: Path,
) -> None:
    write(
        tmp_path,
        "CMakeLists.txt",
        "cmake_minimum_required(VERSION 3.20)\n"
        "if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)\n"
        "  set(CMAKE_CUDA_ARCHITECTURES 70 80)  # a default CUDAARCHS overrides\n"
        "endif()\n" + MORPH + "# set(CMAKE_CUDA_ARCHITECTURES 50) in a comment\n"
        "add_library(k SHARED k.cu)\n"
        'set_target_properties(k PROPERTIES CUDA_ARCHITECTURES "86")\n',
    )
    write(
        tmp_path,
        "cmake/flags.cmake",
        'string(APPEND CMAKE_CUDA_FLAGS " -gencode arch=compute_90,code=sm_90")\n',
    )
    write(tmp_path, "build/CMakeLists.txt", MORPH)  # a build directory is not the package's
    assert forced_arches(tmp_path) == [
        "CMakeLists.txt:5: set(CMAKE_CUDA_ARCHITECTURES 90 100 120)",
        'CMakeLists.txt:8: set_target_properties(k PROPERTIES CUDA_ARCHITECTURES "86")',
        "cmake/flags.cmake:1: string(APPEND CMAKE_CUDA_FLAGS "
        '" -gencode arch=compute_90,code=sm_90")',
    ]
    note = forced_note(tmp_path)
    assert note.startswith(". Its CMake files choose arches themselves, over CUDAARCHS and -D")
    assert "if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)" in note


def test_a_tree_that_leaves_the_arches_to_the_build_gets_no_note(tmp_path: Path) -> None:
    write(tmp_path, "CMakeLists.txt", "project(k LANGUAGES CUDA)\nadd_library(k SHARED k.cu)\n")
    assert forced_arches(tmp_path) == [] and forced_note(tmp_path) == ""


TORCH_CMAKE_LOG = """\
  -- Could NOT find CUDA (missing: CUDA_INCLUDE_DIRS CUDA_CUDART_LIBRARY) (found version "13.0")
  CMake Warning at /v/torch/share/cmake/Caffe2/public/cuda.cmake:40 (message):
    PyTorch: CUDA cannot be found.  Depending on whether you are building
  CMake Error at /v/torch/share/cmake/Caffe2/Caffe2Config.cmake:90 (message):
    Your installed Caffe2 version uses CUDA but I cannot find the CUDA
    libraries.  Please set the proper CUDA prefixes and / or install CUDA.
  Call Stack (most recent call first):
    /v/torch/share/cmake/Torch/TorchConfig.cmake:62 (find_package)
  -- Configuring incomplete, errors occurred!
  error: subprocess-exited-with-error
"""


def test_cmakes_own_words_are_quoted() -> None:
    assert cmake_error(TORCH_CMAKE_LOG) == (
        "/v/torch/share/cmake/Caffe2/Caffe2Config.cmake:90: Your installed Caffe2 version "
        "uses CUDA but I cannot find the CUDA libraries.  Please set the proper CUDA "
        "prefixes and / or install CUDA."
    )
    assert no_cuda_said(TORCH_CMAKE_LOG) == (
        "Could NOT find CUDA (missing: CUDA_INCLUDE_DIRS CUDA_CUDART_LIBRARY) "
        '(found version "13.0")'
    )
    assert no_cuda_said("-- Looking for a CUDA compiler - NOTFOUND\n") == (
        "Looking for a CUDA compiler - NOTFOUND"
    )
    assert no_cuda_said("-- Looking for a CUDA compiler - /usr/bin/nvcc\n") is None
    last = cause(TORCH_CMAKE_LOG.splitlines(), [], {})
    assert last.startswith("CMake stopped the build, at /v/torch/share/cmake/Caffe2/Caffe2Config")


# torch_kdtree 1.0's build (released sdist): its CMakeLists downloads Eigen at build time; the
# setup.py's exception only says its CMake run failed
KDTREE_LOG = """\
  CMake Error at build/temp.linux-x86_64-cpython-311/eigen-prefix/src/eigen-stamp/download-eigen.cmake:170 (message):
    Each download failed!

      error: downloading 'https://gitlab.com/libeigen/eigen/-/archive/3.4.0/eigen-3.4.0.tar.bz2' failed
            status_code: 6
  Traceback (most recent call last):
    File "/x/pyproject_hooks/_in_process/_in_process.py", line 389, in <module>
    File "<string>", line 132, in build_extension
    File "/usr/lib/python3.11/subprocess.py", line 413, in check_call
      raise CalledProcessError(retcode, cmd)
  subprocess.CalledProcessError: Command '['cmake', '--build', '.', '--config', 'Release']' returned non-zero exit status 2.
  error: subprocess-exited-with-error
"""
# cumcubes 0.0.3's build (released sdist): a C++ error in its own source (a missing
# #include <fstream>), archguard's compile-failed line after it; and without archguard, where
# torch took the directory above a wrapper nvcc for CUDA_HOME
CUMCUBES_LOG = """\
  /s/cumcubes-0.0.3/cumcubes/src/cumcubes.cpp:92:28: error: variable 'std::ofstream ply_file' has initializer but incomplete type
  ninja: build stopped: subcommand failed.
  archguard: error: compile-failed: extension cumcubes.src failed to build with sm_80 compute_80
"""
CUMCUBES_PLAIN = """\
  /s/cumcubes-0.0.3/cumcubes/include/cumcubes.hpp:2:10: fatal error: cuda_runtime.h: No such file or directory
"""


def test_a_failed_build_quotes_cmake_or_the_compiler_not_the_wrapper() -> None:
    said = cause(KDTREE_LOG.splitlines(), [], {})
    assert said.startswith(
        "CMake stopped the build, at build/temp.linux-x86_64-cpython-311/eigen-prefix/src/"
        "eigen-stamp/download-eigen.cmake:170: Each download failed! error: downloading "
    )
    assert said.endswith("(its setup.py ran CMake, at setup.py:132)")
    source = cause(CUMCUBES_LOG.splitlines(), [], {}, "/s/cumcubes-0.0.3")
    assert source.startswith(
        "the package's own source does not compile, at cumcubes/src/cumcubes.cpp:92: "
    )
    assert "variable 'std::ofstream ply_file' has initializer but incomplete type" in source
    assert "no arch list changes it" in source  # not archguard's "leave out the targets"
    header = cause(CUMCUBES_PLAIN.splitlines(), [], {}, "/s/cumcubes-0.0.3")
    assert header.startswith("its compile does not find cuda_runtime.h, at cumcubes/include/")
    assert "a CUDA header" in header
