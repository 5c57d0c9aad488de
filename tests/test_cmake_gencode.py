"""The CMake reader follows an nvcc ``-gencode`` (or ``-arch=sm_X``) flag whose arch comes from
a variable back to that variable's source, as it follows ``CMAKE_CUDA_ARCHITECTURES`` (issue
58, item 2): a cache entry gets a ``-D`` first in CMAKE_ARGS, an environment read the
variable, each set to the effective list in the digits the flag embeds (``80;90``); the log
says what the flag's shape cannot say (the PTX of ``code=sm_X``), and where the list cannot
be said in that shape at all (``code=[sm_X,compute_X]`` for an entry without PTX, one arch
taken from a whole value), the build is refused before compiling, naming the line and why. A
literal flag that gives arches outside the list is refused, naming its line.

The CMake is written afresh in the shapes projects use: a loop over a cache entry appending
to ``CMAKE_CUDA_FLAGS``; an option read from the environment looped ``IN LISTS`` into
``CUDA_NVCC_FLAGS``; a function that builds the flags from a list, as google-research's
``create_cuda_gencode_flags`` (sgk/cmake/Cuda.cmake, sgk/CMakeLists.txt, google-research/
google-research 85b9e040); one arch from a cache entry in a generator expression of
``target_compile_options``, as AutoPas's ``CUDA_COMPUTE_CAPABILITY`` (cmake/modules/
cuda.cmake, AutoPas/AutoPas 0aa58890)."""

from __future__ import annotations

from pathlib import Path

import pytest

from archguard.core.arch import parse_arch_list
from archguard.core.toolkit import known_arches
from archguard.frontend.cmake_arches import CMakeArches, cmake_arches
from realtools import REPO

BUILD = {"CUDAARCHS": "80-real;90", "TORCH_CUDA_ARCH_LIST": "8.0;9.0+PTX"}
REFUSED = "refused before building (no nvcc ran): its CMake files force CUDA arches"


def plan(tree: Path, text: str, arches: str = "8.0;9.0+PTX", **environ: str) -> CMakeArches:
    (tree / "CMakeLists.txt").write_text(text)
    entries = parse_arch_list(arches, "the test", known=known_arches())
    return cmake_arches(tree, entries, environ, BUILD)


# a cache entry, each of its items one -gencode in CMAKE_CUDA_FLAGS
CACHED = """\
cmake_minimum_required(VERSION 3.18)
project(pkg LANGUAGES CXX CUDA)
set(PKG_CUDA_ARCHS "70;75;80" CACHE STRING "CUDA arches to build for")
foreach(arch ${PKG_CUDA_ARCHS})
  string(APPEND CMAKE_CUDA_FLAGS " -gencode arch=compute_${arch},code=sm_${arch}")
endforeach()
add_library(pkg_kernels SHARED kernels.cu)
"""


def test_a_cache_entry_looped_into_gencode_flags_gets_a_define_in_their_digits(
    tmp_path: Path,
) -> None:
    """``-DPKG_CUDA_ARCHS=80;90``: the cubins of the list, the digits the flag embeds; the
    PTX of 9.0+PTX the flag's shape cannot say, said."""
    got = plan(tmp_path, CACHED, CMAKE_ARGS="-DCUDAToolkit_ROOT=/t")
    assert got.values == {"CMAKE_ARGS": "-DPKG_CUDA_ARCHS=80;90 -DCUDAToolkit_ROOT=/t"}
    assert got.notes == (
        "its CMake files take PKG_CUDA_ARCHS, a cache entry that reaches the arches (default "
        "'70;75;80', CMakeLists.txt:3): -DPKG_CUDA_ARCHS=80;90 goes first in CMAKE_ARGS (the "
        "digits its nvcc flags embed, at CMakeLists.txt:5; their shape cannot say compute_90: "
        "left out there, the read-back says what the build made of it)",
    )
    assert got.refusal == ""
    every_ptx = plan(tmp_path, CACHED, "8.0;9.0")  # nothing left out: nothing said of it
    assert every_ptx.values == {"CMAKE_ARGS": "-DPKG_CUDA_ARCHS=80;90"}
    assert "left out" not in every_ptx.notes[0]


def test_the_callers_define_wins_and_without_cmake_args_the_default_is_refused(
    tmp_path: Path,
) -> None:
    mine = plan(tmp_path, CACHED, CMAKE_ARGS="-DPKG_CUDA_ARCHS=86")
    assert mine.values == {} and mine.refusal == ""
    assert mine.notes == (
        "its CMake files take PKG_CUDA_ARCHS, a cache entry that reaches the arches: your -D wins",
    )
    entries = parse_arch_list("8.0;9.0+PTX", "the test", known=known_arches())
    unpassed = cmake_arches(tmp_path, entries, {}, BUILD, cmake_args=False)
    assert unpassed.values == {}
    assert unpassed.refusal.startswith(REFUSED)
    assert (
        'CMakeLists.txt:5: string(APPEND CMAKE_CUDA_FLAGS " -gencode '
        'arch=compute_${arch},code=sm_${arch}") (gives sm_70 sm_75 sm_80).'
    ) in unpassed.refusal


# an option read from the environment over its default, looped IN LISTS into FindCUDA's flags
FROM_ENV = """\
set(PKG_GPU_ARCHS 75 80)
if(DEFINED ENV{PKG_GPU_ARCHS})
  set(PKG_GPU_ARCHS $ENV{PKG_GPU_ARCHS})
endif()
foreach(cc IN LISTS PKG_GPU_ARCHS)
  list(APPEND CUDA_NVCC_FLAGS -gencode=arch=compute_${cc},code=sm_${cc})
endforeach()
"""


def test_an_environment_read_looped_into_gencode_flags_is_set(tmp_path: Path) -> None:
    got = plan(tmp_path, FROM_ENV)
    assert got.values == {"PKG_GPU_ARCHS": "80;90"}
    assert got.notes == (
        "its CMake files read PKG_GPU_ARCHS, an arch variable (default '75;80', "
        "CMakeLists.txt:1): set to the effective list in that spelling, "
        "PKG_GPU_ARCHS='80;90' (the digits its nvcc flags embed, at CMakeLists.txt:6; their "
        "shape cannot say compute_90: left out there, the read-back says what the build made "
        "of it)",
    )
    assert got.refusal == ""
    mine = plan(tmp_path, FROM_ENV, PKG_GPU_ARCHS="86")
    assert mine.values == {} and mine.refusal == ""
    assert mine.notes == (
        "its CMake files read PKG_GPU_ARCHS, an arch variable: your PKG_GPU_ARCHS wins",
    )


# each item a cubin and its PTX: code=[sm_X,compute_X], and -arch=sm_X (nvcc's shorthand)
BOTH = [
    pytest.param(
        'set(CMAKE_CUDA_FLAGS "${CMAKE_CUDA_FLAGS} '
        '-gencode arch=compute_${arch},code=[sm_${arch},compute_${arch}]")',
        id="gencode-sm-and-compute",
    ),
    pytest.param('string(APPEND CMAKE_CUDA_FLAGS " -arch=sm_${arch}")', id="arch-sm"),
]


@pytest.mark.parametrize("line", BOTH)
def test_a_flag_that_gives_each_item_with_its_ptx_says_only_a_list_of_such_entries(
    tmp_path: Path, line: str
) -> None:
    """With PTX for every entry, the items are the list; with 8.0 without PTX, the flag
    would give compute_80, which the list lacks: refused before compiling, naming the flag's
    line and why."""
    text = CACHED.replace(
        '  string(APPEND CMAKE_CUDA_FLAGS " -gencode arch=compute_${arch},code=sm_${arch}")',
        "  " + line,
    )
    every_ptx = plan(tmp_path, text, "8.0+PTX;9.0+PTX")
    assert every_ptx.values == {"CMAKE_ARGS": "-DPKG_CUDA_ARCHS=80;90"}
    assert every_ptx.refusal == ""
    got = plan(tmp_path, text)
    assert got.values == {}
    assert got.refusal.startswith(REFUSED)
    assert (
        f"CMakeLists.txt:5: {line} (archguard would set PKG_CUDA_ARCHS, which this flag "
        "reads, but for 80 it gives sm_80 compute_80, and this cell's list has no compute_80)"
    ) in got.refusal


def test_a_variable_the_arches_and_a_flag_both_read_must_be_one_spelling(
    tmp_path: Path,
) -> None:
    """``80-real;90`` for CMAKE_CUDA_ARCHITECTURES, ``80;90`` for the flag: no value says both."""
    text = CACHED + "set(CMAKE_CUDA_ARCHITECTURES ${PKG_CUDA_ARCHS})\n"
    got = plan(tmp_path, text)
    assert got.values == {}
    assert (
        "but it reaches CMAKE_CUDA_ARCHITECTURES too, which takes this cell's list as "
        "80-real;90, where its nvcc flags take 80;90)"
    ) in got.refusal


# one arch from a cache entry, in a generator expression of the target's options
ONE_ARCH = """\
set(PKG_COMPUTE_CAPABILITY "75" CACHE STRING "the compute capability to build for")
add_library(pkg SHARED kernels.cu)
target_compile_options(pkg PUBLIC
  $<$<COMPILE_LANGUAGE:CUDA>:-gencode
  arch=compute_${PKG_COMPUTE_CAPABILITY},code=sm_${PKG_COMPUTE_CAPABILITY}>)
"""


def test_a_flag_that_takes_a_variables_whole_value_says_one_arch(tmp_path: Path) -> None:
    got = plan(tmp_path, ONE_ARCH, "8.0", CMAKE_ARGS="")
    assert got.values == {"CMAKE_ARGS": "-DPKG_COMPUTE_CAPABILITY=80"}
    assert got.refusal == ""
    two = plan(tmp_path, ONE_ARCH, CMAKE_ARGS="")
    assert two.values == {}
    assert (
        "CMakeLists.txt:5: arch=compute_${PKG_COMPUTE_CAPABILITY},code=sm_${PKG_COMPUTE_"
        "CAPABILITY}>) (archguard would set PKG_COMPUTE_CAPABILITY, which this flag reads, "
        "but it takes one arch, PKG_COMPUTE_CAPABILITY's whole value, and this cell's list "
        "gives 2 there (80;90))"
    ) in two.refusal


# a function that builds the flags from a list it is passed (its own variables renamed apart)
FUNCTION = """\
function(pkg_gencode_flags out archs_args)
  set(archs ${archs_args} ${ARGN})
  set(tmp "")
  foreach(arch IN LISTS archs)
    set(tmp "${tmp} -gencode arch=compute_${arch},code=sm_${arch}")
  endforeach(arch)
  set(${out} ${tmp} PARENT_SCOPE)
endfunction()
set(PKG_CUDA_ARCHS "70;80" CACHE STRING "arches")
pkg_gencode_flags(PKG_GENCODE {passed})
set(CMAKE_CUDA_FLAGS "${CMAKE_CUDA_FLAGS} ${PKG_GENCODE}")
"""


def test_a_list_passed_to_a_function_that_builds_the_flags_is_followed(tmp_path: Path) -> None:
    got = plan(tmp_path, FUNCTION.replace("{passed}", '"${PKG_CUDA_ARCHS}"'), CMAKE_ARGS="")
    assert got.values == {"CMAKE_ARGS": "-DPKG_CUDA_ARCHS=80;90"}
    assert got.refusal == ""
    # a bare ${X}: CMake splits it, where each item goes cannot be told (the read-back's)
    bare = plan(tmp_path, FUNCTION.replace("{passed}", "${PKG_CUDA_ARCHS}"), CMAKE_ARGS="")
    assert bare.values == {} and bare.refusal == ""
    # a literal list passed: refused, by the line in the function's body and its call
    literal = plan(tmp_path, FUNCTION.replace("{passed}", '"70;75"'), CMAKE_ARGS="")
    assert (
        'CMakeLists.txt:5: set(tmp "${tmp} -gencode arch=compute_${arch},code=sm_${arch}") '
        "(called at CMakeLists.txt:10) (gives sm_70 sm_75)"
    ) in literal.refusal


LITERAL = """\
foreach(arch 70 75)
  string(APPEND CMAKE_CUDA_FLAGS " -gencode arch=compute_${arch},code=sm_${arch}")
endforeach()
list(APPEND CUDA_NVCC_FLAGS -gencode arch=compute_80,code=sm_80)
string(APPEND CMAKE_CUDA_FLAGS " --generate-code=arch=compute_90,code=[sm_90,compute_90]")
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  string(APPEND CMAKE_CUDA_FLAGS " -gencode arch=compute_61,code=sm_61")
endif()
if(CMAKE_CUDA_FLAGS MATCHES "-gencode arch=compute_50")
  message(STATUS "-gencode arch=compute_50,code=sm_50 given")
endif()
"""


def test_literal_flags_outside_the_list_are_refused_and_those_within_it_are_not(
    tmp_path: Path,
) -> None:
    """A loop over literal items is a literal list (its line named once, with what all its
    items give); a literal flag whose arches the list holds adds nothing CMake's own flags
    for the list do not; a default under the list's guard, a test and a message choose
    nothing."""
    got = plan(tmp_path, LITERAL)
    assert got.values == {}
    assert got.refusal.startswith(REFUSED)
    assert (
        '80-real;90: CMakeLists.txt:2: string(APPEND CMAKE_CUDA_FLAGS " -gencode '
        'arch=compute_${arch},code=sm_${arch}") (gives sm_70 sm_75). Fix:'
    ) in got.refusal
    for never in ("sm_80", "sm_90", "61", "50"):
        assert never not in got.refusal
    within = plan(tmp_path, LITERAL.replace("70 75", "80 90"))
    assert within.refusal == ""


# one variable per arch, the project's flags taking those it picks
PICKED = """\
set(SM61 "-gencode arch=compute_61,code=sm_61")
set(SM80 "-gencode arch=compute_80,code=sm_80")
set(SM90 "-gencode arch=compute_90,code=[sm_90,compute_90]")
set(CUDA_NVCC_FLAGS ${CUDA_NVCC_FLAGS} ${SM80} ${SM90})
"""


def test_a_flag_in_a_variable_no_compile_reads_is_not_refused(tmp_path: Path) -> None:
    assert plan(tmp_path, PICKED).refusal == ""
    got = plan(tmp_path, PICKED.replace("${SM90}", "${SM61}"))
    assert 'CMakeLists.txt:1: set(SM61 "-gencode arch=compute_61,code=sm_61") (gives sm_61).' in (
        got.refusal
    )


def test_flags_whose_arch_another_command_computes_are_left_to_the_read_back() -> None:
    """tests/packages/embedfat: its flags take each arch from CMAKE_CUDA_ARCHITECTURES through
    string(REGEX MATCH) and list(APPEND): neither set nor refused."""
    tree = REPO / "tests" / "packages" / "embedfat"
    entries = parse_arch_list("8.0;9.0+PTX", "the test", known=known_arches())
    got = cmake_arches(tree, entries, {}, BUILD)
    assert got == CMakeArches()
