# ruff: noqa: E501 (real build-log lines, quoted whole)
"""archguard.frontend.cmake: the lines of a package's CMake files that choose CUDA arches
themselves, and CMake's own words in a build log (the CMake text is as real projects write
it; the log lines are CMake 3.25's and torch 2.13's, copied from real builds here)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from archguard.core.arch import parse_arch_list
from archguard.core.toolkit import known_arches
from archguard.frontend.cmake import cmake_error, forced_arches, forced_note, no_cuda_said
from archguard.frontend.cmake_arches import CMakeArches, cmake_arches
from archguard.frontend.failures import cause
from realtools import CUDA_HOME, REPO, build_env, cli, copy_tree, needs_cuda_torch, needs_nvcc

PACKAGES = REPO / "tests" / "packages"

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
    assert "(its setup.py ran CMake, at setup.py:132)" in said
    assert said.endswith(  # an ExternalProject's: no FetchContent source directory to give
        "its CMake files download https://gitlab.com/libeigen/eigen/-/archive/3.4.0/"
        "eigen-3.4.0.tar.bz2 (FetchContent or ExternalProject) and the download failed (no "
        "reason given): build where that address is reached, or give the dependency's source "
        "beforehand"
    )
    source = cause(CUMCUBES_LOG.splitlines(), [], {}, "/s/cumcubes-0.0.3")
    assert source.startswith(
        "the package's own source does not compile, at cumcubes/src/cumcubes.cpp:92: "
    )
    assert "variable 'std::ofstream ply_file' has initializer but incomplete type" in source
    assert "no arch list changes it" in source  # not archguard's "leave out the targets"
    header = cause(CUMCUBES_PLAIN.splitlines(), [], {}, "/s/cumcubes-0.0.3")
    assert header.startswith("its compile does not find cuda_runtime.h, at cumcubes/include/")
    assert "a CUDA header" in header


# --- before the build: the package's own arch variables, and lines nothing can change -------
# (archguard.frontend.toolkit.cmake_arches on archguard.frontend.cmake's reader; the CMake is
# shaped as real projects write it: the issue's package, RAPIDS-style cache variables read
# from the environment, a function that returns early when the arches are given)

LIST = parse_arch_list("8.0;9.0+PTX", "the test", known=known_arches())  # 80-real;90
BUILD = {"CUDAARCHS": "80-real;90", "TORCH_CUDA_ARCH_LIST": "8.0;9.0+PTX"}


def plan(tmp_path: Path, text: str, **environ: str) -> CMakeArches:
    write(tmp_path, "CMakeLists.txt", text)
    return cmake_arches(tmp_path, LIST, environ, BUILD)


ISSUE = """\
cmake_minimum_required(VERSION 3.20)
if(NOT DEFINED ENV{MYPKG_CUDA_ARCHITECTURES})
  set(MYPKG_ARCHES "70;75;80;86;89;90")
else()
  set(MYPKG_ARCHES "$ENV{MYPKG_CUDA_ARCHITECTURES}")
endif()
set(CMAKE_CUDA_ARCHITECTURES ${MYPKG_ARCHES} CACHE STRING "CUDA arches" FORCE)
project(mypkg LANGUAGES CXX CUDA)
add_library(k SHARED k.cu)
set_target_properties(k PROPERTIES
  CUDA_ARCHITECTURES "${MYPKG_ARCHES}")
"""


def test_the_packages_own_variable_in_its_cmake_files_gets_the_list_in_its_spelling(
    tmp_path: Path,
) -> None:
    """The issue's package: its variable is set to the list (CMake's spelling, since it goes
    to CMAKE_CUDA_ARCHITECTURES), said with where the default is; the lines that force it
    over CUDAARCHS follow a variable archguard now sets, and are not a refusal."""
    got = plan(tmp_path, ISSUE)
    assert got.values == {"MYPKG_CUDA_ARCHITECTURES": "80-real;90"}
    assert got.notes == (
        "its CMake files read MYPKG_CUDA_ARCHITECTURES, an arch variable (default "
        "'70;75;80;86;89;90', CMakeLists.txt:3): set to the effective list in that spelling, "
        "MYPKG_CUDA_ARCHITECTURES='80-real;90'",
    )
    assert got.refusal == ""
    mine = plan(tmp_path, ISSUE, MYPKG_CUDA_ARCHITECTURES="86")  # the caller's wins
    assert mine.values == {} and mine.refusal == ""
    assert mine.notes == (
        "its CMake files read MYPKG_CUDA_ARCHITECTURES, an arch variable: your "
        "MYPKG_CUDA_ARCHITECTURES wins",
    )
    write(tmp_path, "CMakeLists.txt", ISSUE)  # one setup.py already set: kept, not said twice
    given = cmake_arches(tmp_path, LIST, {}, {**BUILD, "MYPKG_CUDA_ARCHITECTURES": "80-real;90"})
    assert given.values == {} and given.notes == () and given.refusal == ""


# An arch variable as many projects write their options (a cache entry, each option read from
# the environment by a loop over the options' names), in the shapes projects use.
LOOP = (PACKAGES / "skbuildloop" / "CMakeLists.txt").read_text()  # built for real in
# tests/test_build_systems.py
# IN ITEMS, and a bare argument that is a list of two
LOOP_ITEMS = LOOP.replace("foreach(_opt ", "foreach(_opt IN ITEMS ").replace("JOBS PKG", "JOBS;PKG")
# a function that wraps the target's property, the option read under if(DEFINED ENV{...})
WRAPPED = """\
option(PKG_FAST "fast build" OFF)
set(PKG_ARCHES "80;90" CACHE STRING "arches")
if(DEFINED ENV{PKG_ARCHES})
  set(PKG_ARCHES $ENV{PKG_ARCHES})
endif()
function(pkg_cuda_library name)
  add_library(${name} SHARED ${ARGN})
  set_target_properties(${name} PROPERTIES CUDA_ARCHITECTURES "${PKG_ARCHES}")
endfunction()
pkg_cuda_library(k k.cu)
"""


@pytest.mark.parametrize("text", [LOOP, LOOP_ITEMS, WRAPPED], ids=["loop", "in-items", "wrapped"])
def test_an_arch_variable_read_through_a_loop_or_a_wrapper_is_found_and_set(
    tmp_path: Path, text: str
) -> None:
    """The variable that reaches CMAKE_CUDA_ARCHITECTURES (or the target's property) from
    the environment, through a foreach() over literal names (written out as CMake runs it)
    or beside a function that applies it, is set to the list before CMake runs; the literal
    list it replaces is then no refusal."""
    got = plan(tmp_path, text)
    name = "PKG_ARCHES" if "PKG_ARCHES" in text else "PKG_CUDA_ARCHS"
    assert got.values == {name: "80-real;90"}, got
    assert got.refusal == ""
    (note,) = got.notes
    assert note.startswith(f"its CMake files read {name}, an arch variable (default ")
    assert note.endswith(f"set to the effective list in that spelling, {name}='80-real;90'")


def test_a_loop_that_cannot_be_read_leaves_its_forced_list_refused(tmp_path: Path) -> None:
    """A foreach() over a variable's list is not written out: its variable is not followed,
    and the literal list nothing can change is refused before the build, as before."""
    text = LOOP.replace(
        "foreach(_opt PKG_WITH_EXTRAS PKG_MAX_JOBS PKG_CUDA_ARCHS)",
        "foreach(_opt IN LISTS PKG_OPTIONS)",
    )
    got = plan(tmp_path, text)
    assert got.values == {}
    assert 'CMakeLists.txt:17: set(CMAKE_CUDA_ARCHITECTURES "70;75;80;86;89;90;100;120")' in (
        got.refusal
    )


CACHED = (
    'set(PKG_ARCHS "70;80;90" CACHE STRING "arches")\nset(CMAKE_CUDA_ARCHITECTURES ${PKG_ARCHS})\n'
)


def test_an_arch_cache_entry_with_a_literal_default_gets_a_define_and_the_callers_wins(
    tmp_path: Path,
) -> None:
    """A cache entry (no environment reads it) whose value reaches the arches: a -D first in
    CMAKE_ARGS sets it, said; the caller's own -D wins; with FORCE no -D can, refused."""
    write(tmp_path, "CMakeLists.txt", CACHED)
    given = {**BUILD, "CMAKE_ARGS": "-DCUDAToolkit_ROOT=/t"}
    got = cmake_arches(tmp_path, LIST, {}, given)
    assert got.values == {"CMAKE_ARGS": "-DPKG_ARCHS=80-real;90 -DCUDAToolkit_ROOT=/t"}
    assert got.notes == (
        "its CMake files take PKG_ARCHS, a cache entry that reaches the arches (default "
        "'70;80;90', CMakeLists.txt:1): -DPKG_ARCHS=80-real;90 goes first in CMAKE_ARGS",
    )
    assert got.refusal == ""
    mine = cmake_arches(tmp_path, LIST, {"CMAKE_ARGS": "-DPKG_ARCHS:STRING=86"}, given)
    assert mine.values == {} and mine.refusal == ""
    assert mine.notes == (
        "its CMake files take PKG_ARCHS, a cache entry that reaches the arches: your -D wins",
    )
    write(tmp_path, "CMakeLists.txt", CACHED.replace('"arches")', '"arches" FORCE)'))
    forced = cmake_arches(tmp_path, LIST, {}, given)
    assert (
        forced.values == {} and "CMakeLists.txt:2: set(CMAKE_CUDA_ARCHITECTURES" in forced.refusal
    )


OWN_DEFAULTS = [
    pytest.param(  # read first, then a default where it was empty
        'set(V "$ENV{X_CUDA_ARCHS}")\nif(NOT V)\n  set(V 80;86)\nendif()\n'
        "set_property(TARGET k PROPERTY CUDA_ARCHITECTURES ${V})\n",
        {"X_CUDA_ARCHS": "80-real;90"},
        id="read-then-if-not",
    ),
    pytest.param(  # a default before the read, which overrides it
        "set(V 75-real 80-real)\nif(DEFINED ENV{X_ARCHS})\n  set(V $ENV{X_ARCHS})\nendif()\n"
        "set(CMAKE_CUDA_ARCHITECTURES ${V})\n",
        {"X_ARCHS": "80-real;90"},
        id="default-then-read",
    ),
    pytest.param(  # the environment's own default, for a script that reads it (dotted)
        'if(NOT DEFINED ENV{X_ARCH_LIST})\n  set(ENV{X_ARCH_LIST} "7.5 8.0")\nendif()\n'
        "execute_process(COMMAND python gen.py $ENV{X_ARCH_LIST})\n",
        {"X_ARCH_LIST": "8.0 9.0"},
        id="env-default-dotted",
    ),
    pytest.param(  # numbers that go to no CMake arch variable: plain numbers
        'if(NOT DEFINED ENV{X_SMS})\n  set(SMS "75,80")\nelse()\n  set(SMS "$ENV{X_SMS}")\n'
        "endif()\nadd_compile_definitions(SMS=${SMS})\n",
        {"X_SMS": "80,90"},
        id="numbers-elsewhere",
    ),
    pytest.param(  # set after the read, unconditionally: an override, not a default
        "set(V $ENV{X_ARCHS})\nset(V 80)\n", {}, id="override-not-default"
    ),
    pytest.param(  # a RAPIDS-style cache variable from the environment, detected when empty
        'set(CUDA_ARCHITECTURES "$ENV{CUDA_ARCHITECTURES}" CACHE STRING "arches")\n'
        'if("${CUDA_ARCHITECTURES}" STREQUAL "")\n'
        "  execute_process(COMMAND detect OUTPUT_VARIABLE CUDA_ARCHITECTURES)\nendif()\n",
        {},
        id="no-literal-default",
    ),
    pytest.param(  # not an arch variable by its name; archguard's own variables
        'if(NOT DEFINED ENV{X_OPTIONS})\n  set(O "80")\nelse()\n  set(O "$ENV{X_OPTIONS}")\n'
        'endif()\nset(T "$ENV{TORCH_CUDA_ARCH_LIST}")\nif(NOT T)\n  set(T "8.0")\nendif()\n',
        {},
        id="not-its-arch-variable",
    ),
]


@pytest.mark.parametrize(("text", "values"), OWN_DEFAULTS)
def test_an_arch_variable_with_a_literal_default_is_set_in_that_defaults_spelling(
    tmp_path: Path, text: str, values: dict[str, str]
) -> None:
    got = plan(tmp_path, text)
    assert got.values == values
    assert len(got.notes) == len(values)
    if "X_ARCH_LIST" in values:  # a dotted list without +PTX cannot say the PTX
        assert "its spelling cannot say PTX" in got.notes[0]


FORCING = """\
cmake_minimum_required(VERSION 3.20)
set(CMAKE_CUDA_ARCHITECTURES "70;80" CACHE STRING "" FORCE)
set(CMAKE_CUDA_ARCHITECTURES 75 CACHE STRING "")
project(forcing LANGUAGES CUDA)
set_target_properties(a PROPERTIES POSITION_INDEPENDENT_CODE ON
                                   CUDA_ARCHITECTURES "80;86")
set(KERNEL_ARCHES 90a-real)
set_property(TARGET b APPEND PROPERTY CUDA_ARCHITECTURES ${KERNEL_ARCHES})
set_target_properties(c PROPERTIES CUDA_ARCHITECTURES ${CMAKE_CUDA_ARCHITECTURES})
set_target_properties(d PROPERTIES CUDA_ARCHITECTURES OFF)
set_target_properties(e PROPERTIES CUDA_ARCHITECTURES "80-real;90")
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  set(CMAKE_CUDA_ARCHITECTURES 70)
endif()
if(NOT DEFINED ENV{CUDAARCHS})
  set(CMAKE_CUDA_ARCHITECTURES 70)
endif()
list(APPEND MORE 100)
set(CMAKE_CUDA_ARCHITECTURES ${MORE})
pick_arches(PICKED)
set_property(TARGET f PROPERTY CUDA_ARCHITECTURES ${PICKED})
set(CMAKE_CUDA_ARCHITECTURES ${GIVEN_BY_D})
set(CMAKE_CUDA_ARCHITECTURES "$<IF:$<CONFIG:Debug>,80,90>")
# set(CMAKE_CUDA_ARCHITECTURES 61)
#[[ set(CMAKE_CUDA_ARCHITECTURES 61)
]]
message(STATUS [=[ set(CMAKE_CUDA_ARCHITECTURES 61) ]=])
message(STATUS "# set(CMAKE_CUDA_ARCHITECTURES 61)")
function(configure_arches)
  if(DEFINED CMAKE_CUDA_ARCHITECTURES AND NOT CMAKE_CUDA_ARCHITECTURES STREQUAL "")
    return()
  endif()
  set(CMAKE_CUDA_ARCHITECTURES "75;80;86" PARENT_SCOPE)
endfunction()
SET (CMAKE_CUDA_ARCHITECTURES
     all-major)
"""


def test_lines_that_force_a_literal_list_are_refused_before_the_build_and_no_others(
    tmp_path: Path,
) -> None:
    """A literal set (with FORCE, or a plain variable), a target's property, a variable set
    only from literals: refused with their lines. Not: a cache entry without FORCE, what
    follows the list, OFF, the list itself, a default under a guard or after an early
    return, what another command or a -D writes, a generator expression, comments."""
    got = plan(tmp_path, FORCING)
    # its default under if(NOT DEFINED ...) gets the list as a -D, wherever CUDA is enabled
    assert got.values == {"CMAKE_ARGS": "-DCMAKE_CUDA_ARCHITECTURES=80-real;90"}
    assert got.refusal.startswith(
        "refused before building (no nvcc ran): its CMake files force CUDA arches that no "
        "variable archguard sets can change, where this cell's list is 80-real;90: "
        'CMakeLists.txt:2: set(CMAKE_CUDA_ARCHITECTURES "70;80" CACHE STRING "" FORCE) '
        "(gives 70;80); "
        'CMakeLists.txt:6: CUDA_ARCHITECTURES "80;86") (gives 80;86); '
        "CMakeLists.txt:8: set_property(TARGET b APPEND PROPERTY CUDA_ARCHITECTURES "
        "${KERNEL_ARCHES}) (gives 90a-real); "
        "CMakeLists.txt:35: SET (CMAKE_CUDA_ARCHITECTURES (gives all-major). Fix: patch "
        "those lines to follow ${CMAKE_CUDA_ARCHITECTURES}"
    )
    assert "if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES); or build this cell with that list" in (
        got.refusal
    )
    for never in ("61", "100", "(gives 70)", "(gives 75)", "75;80;86", "80-real;90)", "OFF"):
        assert never not in got.refusal


def test_a_variable_whose_default_archguard_cannot_spell_is_named_in_the_fix(
    tmp_path: Path,
) -> None:
    got = plan(
        tmp_path,
        "if(DEFINED ENV{FOO_ARCH})\n  set(ARCH $ENV{FOO_ARCH})\nelse()\n  set(ARCH native)\n"
        "endif()\nset(CMAKE_CUDA_ARCHITECTURES ${ARCH})\n",
    )
    assert got.values == {}
    assert "CMakeLists.txt:6: set(CMAKE_CUDA_ARCHITECTURES ${ARCH}) (gives arches of its own)" in (
        got.refusal
    )
    assert (
        "Fix: set FOO_ARCH (which that value reads from the environment, unset here) to this "
        "cell's list, 80-real;90 in CMake's spelling; or patch"
    ) in got.refusal
    assert plan(tmp_path, (tmp_path / "CMakeLists.txt").read_text(), FOO_ARCH="80").refusal == ""


def test_cmake_files_under_the_tree_are_read_and_vendored_or_test_ones_are_not(
    tmp_path: Path,
) -> None:
    write(tmp_path, "CMakeLists.txt", "include(cmake/arches.cmake)\n")
    write(tmp_path, "cmake/arches.cmake", 'set(CMAKE_CUDA_ARCHITECTURES "86")\n')
    write(tmp_path, "third_party/lib/CMakeLists.txt", "set(CMAKE_CUDA_ARCHITECTURES 61)\n")
    write(tmp_path, "build/CMakeLists.txt", "set(CMAKE_CUDA_ARCHITECTURES 61)\n")
    write(tmp_path, "tests/CMakeLists.txt", "set(CMAKE_CUDA_ARCHITECTURES 61)\n")  # seldom built
    refusal = cmake_arches(tmp_path, LIST, {}, BUILD).refusal
    assert 'cmake/arches.cmake:1: set(CMAKE_CUDA_ARCHITECTURES "86") (gives 86)' in refusal
    assert "61" not in refusal


@needs_nvcc
@needs_cuda_torch
def test_archguard_wheel_refuses_a_forced_literal_list_before_any_nvcc_runs(
    tmp_path: Path,
) -> None:
    """A scikit-build-core package whose CMakeLists forces 75;80 over CUDAARCHS: refused
    before its build requirements are installed or CMake runs, naming the lines. CMake
    would run CUDACXX, a script that logs each run; it never ran."""
    root = copy_tree(PACKAGES / "skbuild", tmp_path / "skbuild")
    lists = root / "CMakeLists.txt"
    lists.write_text(
        lists.read_text().replace(
            "add_library(",
            'set(CMAKE_CUDA_ARCHITECTURES "75;80" CACHE STRING "" FORCE)\nadd_library(',
            1,
        )
        + 'set_target_properties(skbuildcuda_k PROPERTIES\n  CUDA_ARCHITECTURES "80;86")\n'
    )
    ran = tmp_path / "nvcc-ran.log"
    nvcc = tmp_path / "nvcc"
    nvcc.write_text(f'#!/bin/sh\necho "$@" >> {ran}\nexec {CUDA_HOME}/bin/nvcc "$@"\n')
    nvcc.chmod(0o755)
    out = tmp_path / "out"
    start = time.monotonic()
    proc = cli(
        "wheel", str(root), "-w", str(out),
        env=build_env(ARCHGUARD_ARCH_LIST="8.0", CUDACXX=str(nvcc)),
    )  # fmt: skip
    took = time.monotonic() - start
    assert proc.returncode == 1, proc.stdout + proc.stderr[-3000:]
    assert "FAILED  " in proc.stdout and "refused before building (no nvcc ran)" in proc.stdout
    assert (
        'CMakeLists.txt:3: set(CMAKE_CUDA_ARCHITECTURES "75;80" CACHE STRING "" FORCE) '
        "(gives 75;80); "
        'CMakeLists.txt:7: CUDA_ARCHITECTURES "80;86") (gives 80;86)'
    ) in proc.stdout
    assert "where this cell's list is 80:" in proc.stdout
    assert not ran.exists(), ran.read_text()
    assert "pip wheel" not in proc.stderr  # the build was never started
    assert not list(tmp_path.rglob("*.o")) and not list(tmp_path.rglob("*.whl"))
    assert not (root / "build").exists()
    assert took < 60, took  # the resolution only: no build environment, no CMake


def test_a_file_of_forced_lines_names_five_and_counts_the_rest(tmp_path: Path) -> None:
    got = plan(tmp_path, "".join(f"set(CMAKE_CUDA_ARCHITECTURES {75 + i})\n" for i in range(30)))
    assert "CMakeLists.txt:5: set(CMAKE_CUDA_ARCHITECTURES 79) (gives 79); and 15 more." in (
        got.refusal
    )
    assert "CMakeLists.txt:6:" not in got.refusal


def test_archguards_own_reading_failing_is_said_and_stops_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from archguard.frontend import cmake

    def broken(tree: Path) -> object:
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(cmake.CMakeFiles, "read", broken)
    got = plan(tmp_path, ISSUE)
    assert got.values == {} and got.refusal == ""
    assert got.notes == (
        "warning: archguard could not read its CMake files (RecursionError: maximum recursion "
        "depth exceeded): none of their arch variables set, nothing checked before the build "
        "(the read-back checks the wheel)",
    )


BEFORE_CUDA = """\
cmake_minimum_required(VERSION 3.18)
project(ggmlish LANGUAGES C CXX)
option(PKG_CUBLAS "use cuBLAS" ON)
if(PKG_CUBLAS)
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES "52;61;70")
  endif()
  message(STATUS "Using CUDA architectures: ${CMAKE_CUDA_ARCHITECTURES}")
  enable_language(CUDA)
endif()
"""


def test_a_default_set_before_cuda_is_enabled_gets_the_list_as_a_define(tmp_path: Path) -> None:
    """``if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES) set(... "52;61;70")`` ahead of
    ``enable_language(CUDA)`` (the shape of ggml-era packages): CUDAARCHS is read only as CUDA
    is enabled, so the default would stand and nvcc 13 would stop at compute_52. A -D first
    in CMAKE_ARGS defines the variable before any line runs; the caller's -D wins; where
    CMAKE_ARGS does not reach CMake, nothing is given."""
    write(tmp_path, "CMakeLists.txt", BEFORE_CUDA)
    given = {**BUILD, "CMAKE_ARGS": "-DCUDAToolkit_ROOT=/t"}
    got = cmake_arches(tmp_path, LIST, {}, given)
    assert got.values == {
        "CMAKE_ARGS": "-DCMAKE_CUDA_ARCHITECTURES=80-real;90 -DCUDAToolkit_ROOT=/t"
    }
    assert got.notes == (
        "its CMake files set a default of CMAKE_CUDA_ARCHITECTURES (CMakeLists.txt:6: "
        'set(CMAKE_CUDA_ARCHITECTURES "52;61;70")), which stands where it runs before CUDA is '
        "enabled (CUDAARCHS is read only then): -DCMAKE_CUDA_ARCHITECTURES=80-real;90 goes "
        "first in CMAKE_ARGS",
    )
    assert got.refusal == ""
    mine = cmake_arches(tmp_path, LIST, {"CMAKE_ARGS": "-DCMAKE_CUDA_ARCHITECTURES=86"}, given)
    assert mine.values == {} and mine.refusal == ""
    assert mine.notes == (
        "its CMake files set a default of CMAKE_CUDA_ARCHITECTURES: your "
        "-DCMAKE_CUDA_ARCHITECTURES wins",
    )
    unreached = cmake_arches(tmp_path, LIST, {}, given, cmake_args=False)
    assert unreached.values == {} and unreached.notes == ()
