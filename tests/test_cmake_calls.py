"""The CMake reader follows an arch list through a package's own function() or macro() (issue
58): the value a call passes reaches the target's ``CUDA_ARCHITECTURES`` (or
``CMAKE_CUDA_ARCHITECTURES``), so its source, a cache entry or the environment, is set to the
list before CMake runs; a literal list passed is refused before anything compiles, naming
the call's line. And one reader (issue 56): the failure's note after the build reads the same
commands as the refusal before it.

The CMake is written in the shapes packages use: a positional ``pkg_set_arches(tgt archs)``
wrapping ``set_target_properties``; a macro reading an option from the environment; a
keyword function parsed with ``cmake_parse_arguments(PARSE_ARGV ...)`` and an
``ARCHITECTURES`` keyword guarded by ``if(<PREFIX>_ARCHITECTURES)``, the shape of vLLM's
``define_gpu_extension_target`` (cmake/utils.cmake, vllm-project/vllm 00c1d959; written
here afresh, not copied); a function that returns early when CMake was given the arches."""

from __future__ import annotations

from pathlib import Path

import pytest

from archguard.core.arch import parse_arch_list
from archguard.core.toolkit import known_arches
from archguard.frontend.cmake import forced_arches
from archguard.frontend.cmake_arches import CMakeArches, cmake_arches

LIST = parse_arch_list("8.0;9.0+PTX", "the test", known=known_arches())  # 80-real;90
BUILD = {"CUDAARCHS": "80-real;90", "TORCH_CUDA_ARCH_LIST": "8.0;9.0+PTX"}
REFUSED = "refused before building (no nvcc ran): its CMake files force CUDA arches"


def plan(tree: Path, files: dict[str, str], **environ: str) -> CMakeArches:
    for name, text in files.items():
        path = tree / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return cmake_arches(tree, LIST, environ, BUILD)


# cmake/utils.cmake of a package: a positional wrapper of the target's property
SET_ARCHES = """\
# Give a target the arches in `archs`, a CMake arch list.
function(pkg_set_arches tgt archs)
  set_target_properties(${tgt} PROPERTIES
    CUDA_ARCHITECTURES ${archs}
    CUDA_SEPARABLE_COMPILATION ON)
endfunction()
"""
FROM_CACHE = """\
cmake_minimum_required(VERSION 3.20)
project(pkg LANGUAGES CXX CUDA)
set(PKG_ARCHS "70;75;80;86" CACHE STRING "CUDA arches to build for")
include(cmake/utils.cmake)
add_library(pkg_kernels SHARED kernels.cu)
pkg_set_arches(pkg_kernels "${PKG_ARCHS}")
"""
FROM_ENV = """\
cmake_minimum_required(VERSION 3.20)
if(DEFINED ENV{PKG_CUDA_ARCHS})
  set(PKG_ARCHS "$ENV{PKG_CUDA_ARCHS}")
else()
  set(PKG_ARCHS "70;75;80;86")
endif()
project(pkg LANGUAGES CXX CUDA)
include(cmake/utils.cmake)
add_library(pkg_kernels SHARED kernels.cu)
pkg_set_arches(pkg_kernels "${PKG_ARCHS}")
"""
LITERAL = """\
cmake_minimum_required(VERSION 3.20)
project(pkg LANGUAGES CXX CUDA)
include(cmake/utils.cmake)
add_library(pkg_kernels SHARED kernels.cu)
add_library(pkg_extra SHARED extra.cu)
pkg_set_arches(pkg_kernels "${PKG_ARCHS}")
pkg_set_arches(pkg_extra "80;90")
"""


@pytest.mark.parametrize("kind", ["function", "macro"])
def test_a_cache_entry_passed_to_a_function_gets_a_define(tmp_path: Path, kind: str) -> None:
    got = plan(
        tmp_path,
        {"CMakeLists.txt": FROM_CACHE, "cmake/utils.cmake": SET_ARCHES.replace("function", kind)},
        CMAKE_ARGS="-DCUDAToolkit_ROOT=/t",
    )
    assert got.values == {"CMAKE_ARGS": "-DPKG_ARCHS=80-real;90 -DCUDAToolkit_ROOT=/t"}
    assert got.notes == (
        "its CMake files take PKG_ARCHS, a cache entry that reaches the arches (default "
        "'70;75;80;86', CMakeLists.txt:3): -DPKG_ARCHS=80-real;90 goes first in CMAKE_ARGS",
    )
    assert got.refusal == ""


@pytest.mark.parametrize("kind", ["function", "macro"])
def test_an_environment_variable_passed_to_a_function_is_set_in_its_spelling(
    tmp_path: Path, kind: str
) -> None:
    files = {"CMakeLists.txt": FROM_ENV, "cmake/utils.cmake": SET_ARCHES.replace("function", kind)}
    got = plan(tmp_path, files)
    assert got.values == {"PKG_CUDA_ARCHS": "80-real;90"}
    assert got.notes == (
        "its CMake files read PKG_CUDA_ARCHS, an arch variable (default '70;75;80;86', "
        "CMakeLists.txt:5): set to the effective list in that spelling, "
        "PKG_CUDA_ARCHS='80-real;90'",
    )
    assert got.refusal == ""
    mine = plan(tmp_path, files, PKG_CUDA_ARCHS="86")  # the caller's wins
    assert mine.values == {} and mine.refusal == ""


@pytest.mark.parametrize("kind", ["function", "macro"])
def test_a_literal_list_passed_to_a_function_is_refused_naming_the_call(
    tmp_path: Path, kind: str
) -> None:
    """The call that passes ``"80;90"`` is named; the one that passes a variable the files
    never set (a -D may) is not."""
    got = plan(
        tmp_path,
        {"CMakeLists.txt": LITERAL, "cmake/utils.cmake": SET_ARCHES.replace("function", kind)},
    )
    assert got.values == {}
    assert got.refusal.startswith(REFUSED)
    assert '80-real;90: CMakeLists.txt:7: pkg_set_arches(pkg_extra "80;90") (gives 80;90).' in (
        got.refusal
    )
    assert "pkg_kernels" not in got.refusal and "utils.cmake" not in got.refusal
    # the failure's note after the build names the same line
    assert 'CMakeLists.txt:7: pkg_set_arches(pkg_extra "80;90")' in forced_arches(tmp_path)


def test_a_call_whose_arguments_places_a_variable_decides_is_left_to_the_read_back(
    tmp_path: Path,
) -> None:
    """``pkg_set_arches(k ${ARCHES})``: CMake splits the list, ``archs`` gets its first item
    and the rest go to ARGN. Not followed (no variable set for it) and not refused."""
    text = 'set(ARCHES "70;80")\n' + SET_ARCHES + "pkg_set_arches(k ${ARCHES})\n"
    got = plan(tmp_path, {"CMakeLists.txt": text})
    assert got.values == {} and got.refusal == ""


# a default inside the function, a local of its own: each call keeps its own
DEFAULTED = """\
function(pkg_cuda_library name archs)
  if(NOT archs)
    set(archs "70;80")
  endif()
  add_library(${name} SHARED ${ARGN})
  set_property(TARGET ${name} PROPERTY CUDA_ARCHITECTURES "${archs}")
endfunction()
"""


def test_a_functions_own_default_stays_its_calls_own(tmp_path: Path) -> None:
    head = (
        "if(DEFINED ENV{PKG_ARCHS})\n  set(ARCHES $ENV{PKG_ARCHS})\n"
        'else()\n  set(ARCHES "75")\nendif()\n'
    )
    got = plan(
        tmp_path, {"CMakeLists.txt": head + DEFAULTED + 'pkg_cuda_library(k "${ARCHES}" k.cu)\n'}
    )
    assert got.values == {"PKG_ARCHS": "80-real;90"} and got.refusal == ""
    # without a variable: the body's line is named, with the call that ran it
    got = plan(tmp_path, {"CMakeLists.txt": DEFAULTED + 'pkg_cuda_library(k "" k.cu)\n'})
    assert got.values == {}
    assert (
        'CMakeLists.txt:6: set_property(TARGET ${name} PROPERTY CUDA_ARCHITECTURES "${archs}") '
        "(called at CMakeLists.txt:8) (gives arches of its own)"
    ) in got.refusal


# keyword arguments parsed with cmake_parse_arguments, the property guarded by the keyword
KEYWORDS = """\
function(pkg_extension_target MOD_NAME)
  cmake_parse_arguments(PARSE_ARGV 1 EXT
    "WITH_SOABI"
    "DESTINATION;LANGUAGE"
    "SOURCES;ARCHITECTURES;LIBRARIES")
  add_library(${MOD_NAME} MODULE ${EXT_SOURCES})
  if(EXT_ARCHITECTURES)
    set_target_properties(${MOD_NAME} PROPERTIES
      ${EXT_LANGUAGE}_ARCHITECTURES "${EXT_ARCHITECTURES}")
  endif()
  install(TARGETS ${MOD_NAME} LIBRARY DESTINATION ${EXT_DESTINATION})
endfunction()
"""
KEYWORD_CALL = """\
pkg_extension_target(_C
  DESTINATION pkg
  LANGUAGE CUDA
  SOURCES csrc/ops.cu csrc/bind.cpp
  ARCHITECTURES {arches}
  WITH_SOABI)
"""


def test_a_keyword_argument_parsed_by_cmake_parse_arguments_is_followed(tmp_path: Path) -> None:
    head = 'set(PKG_GPU_ARCHES "70;80;90" CACHE STRING "arches")\n'
    call = KEYWORD_CALL.format(arches="${PKG_GPU_ARCHES}")
    got = plan(tmp_path, {"CMakeLists.txt": head + KEYWORDS + call}, CMAKE_ARGS="")
    assert got.values == {"CMAKE_ARGS": "-DPKG_GPU_ARCHES=80-real;90"}
    assert got.refusal == ""
    got = plan(tmp_path, {"CMakeLists.txt": KEYWORDS + KEYWORD_CALL.format(arches="75 86")})
    assert "CMakeLists.txt:17: ARCHITECTURES 75 86 (gives 75;86)." in got.refusal


# a macro that reads an option from the environment, with its default
OPTION_MACRO = """\
macro(pkg_option name default)
  if(DEFINED ENV{${name}})
    set(${name} "$ENV{${name}}")
  else()
    set(${name} "${default}")
  endif()
endmacro()
pkg_option(PKG_MAX_JOBS 4)
pkg_option(PKG_CUDA_ARCHS "70;80;90")
set(CMAKE_CUDA_ARCHITECTURES ${PKG_CUDA_ARCHS})
"""


def test_an_option_a_macro_reads_from_the_environment_is_set(tmp_path: Path) -> None:
    got = plan(tmp_path, {"CMakeLists.txt": OPTION_MACRO})
    assert got.values == {"PKG_CUDA_ARCHS": "80-real;90"}
    assert got.notes == (
        "its CMake files read PKG_CUDA_ARCHS, an arch variable (default '70;80;90', "
        "CMakeLists.txt:9): set to the effective list in that spelling, "
        "PKG_CUDA_ARCHS='80-real;90'",
    )
    assert got.refusal == ""


# the body forces a list itself: named at each call (and once, unrun, when never called)
LINK_CUDA = """\
function(link_cuda target_name)
  set_target_properties(${target_name} PROPERTIES
    CUDA_ARCHITECTURES "89"
    CUDA_STANDARD 17)
endfunction()
"""


def test_a_list_the_body_forces_is_named_with_each_call(tmp_path: Path) -> None:
    got = plan(tmp_path, {"CMakeLists.txt": LINK_CUDA + "link_cuda(a)\nlink_cuda(b)\n"})
    assert (
        'CMakeLists.txt:3: CUDA_ARCHITECTURES "89" (called at CMakeLists.txt:6) (gives 89); '
        'CMakeLists.txt:3: CUDA_ARCHITECTURES "89" (called at CMakeLists.txt:7) (gives 89).'
    ) in got.refusal
    never = plan(tmp_path, {"CMakeLists.txt": LINK_CUDA})
    assert 'CMakeLists.txt:3: CUDA_ARCHITECTURES "89" (gives 89).' in never.refusal


def test_a_functions_early_return_guards_its_own_body_only(tmp_path: Path) -> None:
    """A return() under if(CMAKE_CUDA_ARCHITECTURES) guards what follows in the function,
    not what follows its call."""
    text = (
        "function(pkg_arches tgt archs)\n"
        "  if(DEFINED CMAKE_CUDA_ARCHITECTURES)\n    return()\n  endif()\n"
        "  set_target_properties(${tgt} PROPERTIES CUDA_ARCHITECTURES ${archs})\n"
        "endfunction()\n"
        'pkg_arches(k "70;80")\n'
        "set_target_properties(j PROPERTIES CUDA_ARCHITECTURES 75)\n"
    )
    got = plan(tmp_path, {"CMakeLists.txt": text})
    assert "CMakeLists.txt:8: set_target_properties(j PROPERTIES CUDA_ARCHITECTURES 75)" in (
        got.refusal
    )
    assert "70;80" not in got.refusal


def test_a_value_that_follows_the_list_through_a_function_is_not_named(tmp_path: Path) -> None:
    text = SET_ARCHES + 'pkg_set_arches(k "${CMAKE_CUDA_ARCHITECTURES}")\n'
    got = plan(tmp_path, {"CMakeLists.txt": text})
    assert got.refusal == "" and forced_arches(tmp_path) == []


def test_the_note_after_the_build_reads_the_commands_the_refusal_reads(tmp_path: Path) -> None:
    """One reader (issue 56): what a line regex took for a choice of arches is none (a
    bracket argument's text, a test of the flags, a read of the property, a message); what
    it missed is named (a command over several lines, by the line of the list)."""
    text = (
        "message(STATUS [=[\nset(CMAKE_CUDA_ARCHITECTURES 61)\n]=])\n"
        'if(CMAKE_CUDA_FLAGS MATCHES "-gencode")\n  message(STATUS "given")\nendif()\n'
        "get_target_property(given k CUDA_ARCHITECTURES)\n"
        'string(REGEX REPLACE "-gencode arch=[^ ]+" "" CMAKE_CUDA_FLAGS "${CMAKE_CUDA_FLAGS}")\n'
        "set(\n  CMAKE_CUDA_ARCHITECTURES\n  86)\n"
        'string(APPEND CMAKE_CUDA_FLAGS " -gencode arch=compute_90,code=sm_90")\n'
    )
    got = plan(tmp_path, {"CMakeLists.txt": text})
    assert forced_arches(tmp_path) == [
        "CMakeLists.txt:9: set(",
        'CMakeLists.txt:12: string(APPEND CMAKE_CUDA_FLAGS " -gencode arch=compute_90,code=sm_90")',
    ]
    assert "CMakeLists.txt:9: set( (gives 86)" in got.refusal


def test_the_note_and_the_refusal_read_the_same_files(tmp_path: Path) -> None:
    """A test's or an example's CMake files, seldom built by a wheel's build: neither
    refused before the build nor named after it."""
    got = plan(
        tmp_path,
        {
            "CMakeLists.txt": "add_subdirectory(tests)\n",
            "tests/CMakeLists.txt": "set(CMAKE_CUDA_ARCHITECTURES 61)\n",
            "examples/demo/CMakeLists.txt": "set(CMAKE_CUDA_ARCHITECTURES 61)\n",
        },
    )
    assert got.refusal == "" and forced_arches(tmp_path) == []


def test_the_notes_own_reading_failing_leaves_the_failures_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from archguard.frontend import cmake

    def broken(tree: Path) -> object:
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(cmake.CMakeFiles, "read", broken)
    assert cmake.forced_note(tmp_path) == (
        " (archguard could not read its CMake files: RecursionError)"
    )
