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
