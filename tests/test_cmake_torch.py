"""Builds that run CMake themselves (issue 58): torch's CMake package named for any CMake a
build runs (``CMAKE_PREFIX_PATH``, ``Torch_DIR``, the package's own ``LIBTORCH_PATH``), and the
fix the farm has when CMake stops (a newer CMake through ``build-requires``, a library CMake
did not find, torch's CMake package). The readers and lines on data; then real builds of a
package written for the test (real CMake, nvcc, torch's CMake files; a plain CUDA kernel)."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from archguard.detect.cudalibs import assemble_root
from archguard.frontend.failures import cause, not_found
from archguard.frontend.setup_py import parse_setup_py
from archguard.frontend.torchcmake import torch_cmake
from realtools import (
    REPO,
    build_env,
    cli,
    copy_tree,
    needs_cuda_torch,
    needs_cuobjdump,
    needs_nvcc,
    only_wheel,
    pip_wheel,
    wheel_record,
    wheel_so_targets,
)

PACKAGE = REPO / "tests" / "packages" / "cmakelibtorch"

# --- the setup.py reader: its own variable for torch's location, handed to CMake ----------

HANDS_TO_CMAKE = {
    # read in the cmake command itself, as a prefix
    "direct": (
        "import os, subprocess\n"
        'subprocess.run(["cmake", "-S", ".", '
        "f\"-DCMAKE_PREFIX_PATH={os.environ['LIBTORCH_PATH']}\"])\n",
        {"LIBTORCH_PATH": "prefix"},
    ),
    # through a name, appended to a list of -D defines that reaches cmake
    "through a list": (
        "import os, subprocess\n"
        'libtorch = os.getenv("LIBTORCH")\n'
        'args = ["-DCMAKE_BUILD_TYPE=Release"]\n'
        "if libtorch:\n"
        "    args.append(libtorch)\n"
        'subprocess.check_call(["cmake", ".."] + args)\n',
        {"LIBTORCH": "prefix"},
    ),
    # -DTorch_DIR: the CMake directory, whatever the variable's name
    "Torch_DIR": (
        "import os\n"
        'where = os.environ.get("TORCH_INSTALL_PREFIX", "")\n'
        'cmake_args = [f"-DTorch_DIR={where}"]\n',
        {"TORCH_INSTALL_PREFIX": "dir"},
    ),
    # into CMake's environment
    "env": (
        "import os\n"
        "env = dict(os.environ)\n"
        'env["CMAKE_PREFIX_PATH"] = os.environ["TORCH_ROOT"] + ":" + env.get("X", "")\n',
        {"TORCH_ROOT": "prefix"},
    ),
    # a *_DIR handed to CMake by a -D of its own: by its name
    "own define": (
        'import os\nd = os.environ.get("MYPKG_TORCH_DIR")\nargs = ["-DMYPKG_TORCH=" + d]\n',
        {"MYPKG_TORCH_DIR": "dir"},
    ),
}

NOT_HANDED = (
    # read, never handed to CMake
    'import os\nhome = os.environ.get("TORCH_HOME")\nprint(home)\n',
    # a switch, not a place
    'import os\nargs = ["-DUSE_TORCH=" + os.environ.get("USE_TORCH", "ON")]\n',
    # archguard's own arch list
    'import os\nargs = ["-DARCHS=" + os.environ["TORCH_CUDA_ARCH_LIST"]]\n',
    # the variable's own name is no mark: LIBTORCH_DIR read next to nothing for CMake
    'import os\nlibtorch = os.environ.get("LIBTORCH_DIR")\n',
    # no torch in the name
    'import os\nargs = ["-DCMAKE_PREFIX_PATH=" + os.environ["MY_PREFIX"]]\n',
)


@pytest.mark.parametrize("case", sorted(HANDS_TO_CMAKE))
def test_the_reader_finds_a_torch_variable_handed_to_cmake(case: str) -> None:
    text, wanted = HANDS_TO_CMAKE[case]
    assert parse_setup_py(text).torch_locations == wanted


@pytest.mark.parametrize("text", NOT_HANDED)
def test_the_reader_leaves_what_is_not_torchs_location_for_cmake(text: str) -> None:
    assert parse_setup_py(text).torch_locations == {}


def test_the_token_reading_finds_it_on_one_line() -> None:
    """A setup.py ast cannot parse (Python 2's print) is read line by line: a torch variable
    read on a line that hands something to CMake."""
    text = (
        "import os, subprocess\nprint 'building'\n"
        "subprocess.check_call(['cmake', '-DCMAKE_PREFIX_PATH=' + os.environ['LIBTORCH_PATH']])\n"
    )
    found = parse_setup_py(text)
    assert found.reading != "ast" and found.torch_locations == {"LIBTORCH_PATH": "prefix"}


def test_the_reader_is_linear_in_the_statements() -> None:
    """A name assigned from the last, 20,000 times over, then handed to CMake: one pass."""

    def text(n: int) -> str:
        chain = "".join(f"v{i + 1} = v{i} + '/x'\n" for i in range(n))
        return f"import os\nv0 = os.environ['LIBTORCH_PATH']\n{chain}a = ['-DX=' + v{n}]\n"

    start = time.perf_counter()
    assert parse_setup_py(text(20_000)).torch_locations == {"LIBTORCH_PATH": "prefix"}
    assert time.perf_counter() - start < 20


# --- the build's environment ---------------------------------------------------------------


def fake_torch(tmp: Path) -> Path:
    torch = tmp / "site-packages" / "torch"
    (torch / "share" / "cmake" / "Torch").mkdir(parents=True)
    (torch / "share" / "cmake" / "Torch" / "TorchConfig.cmake").write_text("")
    return torch


def test_torchs_prefix_goes_before_the_callers_and_torch_dir_is_set(tmp_path: Path) -> None:
    torch = fake_torch(tmp_path)
    prefix, config = f"{torch}/share/cmake", f"{torch}/share/cmake/Torch"
    got = torch_cmake({"CMAKE_PREFIX_PATH": f"/opt/a:{prefix}"}, {}, lambda: torch)
    assert got.variables == {"CMAKE_PREFIX_PATH": f"{prefix}:/opt/a", "Torch_DIR": config}
    # the record: archguard's part, never the caller's /opt/a
    assert got.as_json()["variables"] == {"CMAKE_PREFIX_PATH": prefix, "Torch_DIR": config}
    assert "before your CMAKE_PREFIX_PATH" in got.notes[0]
    alone = torch_cmake({}, {}, lambda: torch)
    assert alone.variables["CMAKE_PREFIX_PATH"] == prefix


def test_the_callers_torch_dir_and_own_variable_win_and_are_said(tmp_path: Path) -> None:
    torch = fake_torch(tmp_path)
    environ = {"Torch_DIR": "/mine/Torch", "LIBTORCH_PATH": "/mine"}
    own = {"LIBTORCH_PATH": "prefix", "PKG_TORCH_DIR": "dir"}
    got = torch_cmake(environ, own, lambda: torch)
    assert "Torch_DIR" not in got.variables and "LIBTORCH_PATH" not in got.variables
    assert got.variables["PKG_TORCH_DIR"] == f"{torch}/share/cmake/Torch"
    said = " ".join(got.notes)
    assert "your Torch_DIR='/mine/Torch' wins" in said and "your LIBTORCH_PATH wins" in said
    assert f"PKG_TORCH_DIR={torch}/share/cmake/Torch" in said
    plain = torch_cmake({}, {"LIBTORCH_PATH": "prefix"}, lambda: torch)
    assert plain.variables["LIBTORCH_PATH"] == str(torch)  # holds share/cmake, as libtorch


def test_no_torch_sets_nothing_and_names_the_packages_variable(tmp_path: Path) -> None:
    got = torch_cmake({}, {"LIBTORCH_PATH": "prefix"}, lambda: None)
    assert got.variables == {} and got.unset == ("LIBTORCH_PATH",)
    assert "no torch in this Python" in got.notes[0] and "LIBTORCH_PATH" in got.notes[0]
    bare = tmp_path / "torch"
    bare.mkdir()
    assert "has no share/cmake/Torch" in torch_cmake({}, {}, lambda: bare).notes[0]


# --- when CMake stops: the fix the farm has ------------------------------------------------

MINIMUM = """\
  CMake Error at CMakeLists.txt:1 (cmake_minimum_required):
    CMake 3.26 or higher is required.  You are running version 3.25.1


  -- Configuring incomplete, errors occurred!
  Traceback (most recent call last):
    File "<string>", line 178, in <module>
  subprocess.CalledProcessError: Command '['cmake', '-S', '.']' returned non-zero exit status 1.
"""


def test_a_cmake_minimum_version_failure_names_the_build_requires_fix() -> None:
    line = cause(MINIMUM.splitlines(), [], {})
    assert line.startswith("CMake stopped the build, at CMakeLists.txt:1: CMake 3.26 or higher")
    assert "(its setup.py ran CMake, at setup.py:178)" in line
    assert 'build-requires = ["cmake>=3.26"] in the farm manifest\'s [[package]] entry' in line
    assert '--build-requires "cmake>=3.26"' in line and "pip's cmake package" in line


REMOVED = """\
  CMake Error at third_party/sentencepiece/CMakeLists.txt:15 (cmake_minimum_required):
    Compatibility with CMake < 3.5 has been removed from CMake.

    Update the VERSION argument <min> value.  Or, use the <min>...<max> syntax
    to tell CMake that the project requires at least <min> but has been updated
    to work with policies introduced by <max> or earlier.

    Or, add -DCMAKE_POLICY_VERSION_MINIMUM=3.5 to try configuring anyway.


  -- Configuring incomplete, errors occurred!
"""


def test_files_written_for_an_old_cmake_under_cmake_4_name_the_policy_floor_fix() -> None:
    """A vendored library's ``cmake_minimum_required(VERSION 3.1)`` under the CMake 4 pip
    installs for the build: the line names CMAKE_POLICY_VERSION_MINIMUM in the package's env
    (CMake 4 reads it from the environment: measured, 4.4.5 configures such a file with it)
    and build-requires cmake<4."""
    line = cause(REMOVED.splitlines(), [], {})
    assert line is not None
    assert line.startswith(
        "CMake stopped the build, at third_party/sentencepiece/CMakeLists.txt:15: "
        "Compatibility with CMake < 3.5 has been removed from CMake."
    )
    assert (
        "the fix the farm has: CMAKE_POLICY_VERSION_MINIMUM=3.5 in the farm manifest's env "
        "table for this package"
    ) in line
    assert 'or build-requires = ["cmake<4"] in its [[package]] entry' in line


def toolkit_root(tmp: Path, *files: str) -> Path:
    root = tmp / "cuda"
    for name in files:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("")
    (root / "lib64").mkdir(parents=True, exist_ok=True)
    return root


NOT_SET = """\
-- Configuring done
CMake Error: The following variables are used in this project, but they are set to NOTFOUND.
Please set them or make sure they are set and tested correctly in the CMake files:
CUDA_cuda_LIBRARY
    linked by target "k" in directory /tmp/nf

-- Generating done
CMake Generate step failed.  Build files cannot be regenerated correctly.
"""


def test_a_library_cmake_did_not_find_is_named_with_what_the_root_has(tmp_path: Path) -> None:
    assert not_found(NOT_SET) == ["CUDA_cuda_LIBRARY"]
    lacking = toolkit_root(tmp_path / "a", "lib64/libcudart.so")
    line = cause(NOT_SET.splitlines(), [], {"CUDAToolkit_ROOT": str(lacking)})
    assert line.startswith("CMake did not find CUDA_cuda_LIBRARY")
    assert f"libcuda.so, the driver's, which the build's toolkit root {lacking} lacks" in line
    stub = toolkit_root(tmp_path / "b", "lib64/stubs/libcuda.so")
    line = cause(NOT_SET.splitlines(), [], {"CUDAToolkit_ROOT": str(stub)})
    assert f"which the build's toolkit root {stub} has (lib64/stubs/libcuda.so)" in line
    found = (
        "CMake Error at /usr/share/cmake-3.25/Modules/FindPackageHandleStandardArgs.cmake:230 "
        "(message):\n  Could NOT find CUDAToolkit (missing: CUDA_CUDART) (found version "
        '"13.0.88")\n'
    )
    line = cause(found.splitlines(), [], {"CUDA_HOME": str(stub)})
    assert "CUDA_CUDART is libcudart.so, which the build's toolkit root" in line
    assert "lacks" in line


def test_torch_not_found_names_what_was_set_and_the_packages_variable(tmp_path: Path) -> None:
    (tmp_path / "setup.py").write_text(
        "import os, subprocess\n"
        "subprocess.run(['cmake', '-DLIBTORCH_PATH=' + os.environ.get('LIBTORCH_PATH', '')])\n"
    )
    log = (
        "CMake Error at CMakeLists.txt:4 (find_package):\n"
        '  By not providing "FindTorch.cmake" in CMAKE_MODULE_PATH this project has\n'
        '  asked CMake to find a package configuration file provided by "Torch", but\n'
    )
    line = cause(log.splitlines(), [], {"Torch_DIR": "/t/Torch"}, str(tmp_path))
    assert "the build had CMAKE_PREFIX_PATH unset, Torch_DIR='/t/Torch'" in line
    assert "its setup.py hands LIBTORCH_PATH (unset) to CMake" in line


# --- the toolkit root: the driver stub -----------------------------------------------------


def test_the_assembled_root_gains_the_wheels_driver_stub(tmp_path: Path) -> None:
    home = toolkit_root(tmp_path, "bin/nvcc", "include/cuda_runtime.h", "lib64/libcudart.so")
    nvidia = tmp_path / "nvidia"
    (nvidia / "cu13" / "lib" / "stubs").mkdir(parents=True)
    (nvidia / "cu13" / "lib" / "stubs" / "libcuda.so").write_text("stub")
    (nvidia / "cu13" / "lib" / "libcublas.so.13").write_text("")
    made = assemble_root(str(home), 13, tmp_path / "roots", roots=[nvidia])
    assert made is not None and "stubs" in made.libraries
    assert (made.root / "lib64" / "stubs" / "libcuda.so").read_text() == "stub"
    # a toolkit's own stubs are kept, never the wheels'
    (home / "lib64" / "stubs").mkdir()
    (home / "lib64" / "stubs" / "libcuda.so").write_text("toolkit")
    own = assemble_root(str(home), 13, tmp_path / "roots", roots=[nvidia])
    assert own is not None and "stubs" not in own.libraries
    assert (own.root / "lib64" / "stubs" / "libcuda.so").read_text() == "toolkit"


# --- real builds -------------------------------------------------------------------------


@pytest.mark.slow
@needs_nvcc
@needs_cuda_torch
@needs_cuobjdump
@pytest.mark.skipif(not shutil.which("cmake"), reason="no cmake")
def test_a_setup_py_running_cmake_on_find_package_torch_builds_with_nothing_set(
    tmp_path: Path,
) -> None:
    """Its CMake appends $ENV{LIBTORCH_PATH} to the prefix path and finds Torch; nobody set
    a variable. Without archguard, CMake stops at find_package(Torch); with it, the wheel
    holds exactly the list, the log says what was set, the record keeps archguard's part."""
    plain = pip_wheel(
        copy_tree(PACKAGE, tmp_path / "plain" / "cmakelibtorch"),
        tmp_path / "plain",
        env=build_env(TORCH_CUDA_ARCH_LIST="8.0"),
    )
    assert plain.returncode != 0
    assert "FindTorch.cmake" in plain.stdout + plain.stderr
    root = copy_tree(PACKAGE, tmp_path / "cmakelibtorch")
    out = tmp_path / "out"
    proc = cli("wheel", str(root), "-w", str(out), env=build_env(ARCHGUARD_ARCH_LIST="8.0"))
    assert proc.returncode == 0, proc.stdout + proc.stderr[-4000:]
    assert "torch's CMake package: CMAKE_PREFIX_PATH gets " in proc.stderr
    assert "its setup.py hands LIBTORCH_PATH to CMake, torch's location: set to" in proc.stderr
    assert "-- cmakelibtorch: Torch_DIR=" in proc.stderr
    built = only_wheel(out)
    assert wheel_so_targets(built, tmp_path) == ["sm_80", "compute_80"]
    build = wheel_record(built)["build"]
    assert isinstance(build, dict)
    kept = build["frontend"]["toolkit"]["torch_cmake"]["variables"]
    assert kept["CMAKE_PREFIX_PATH"].endswith("torch/share/cmake")
    assert kept["Torch_DIR"].endswith("torch/share/cmake/Torch")
    assert kept["LIBTORCH_PATH"].endswith("torch")


@pytest.mark.slow
@needs_nvcc
@needs_cuda_torch
@pytest.mark.skipif(not shutil.which("cmake"), reason="no cmake")
def test_a_cmake_too_old_for_the_package_names_the_build_requires_fix(tmp_path: Path) -> None:
    """The installed CMake (3.25 here) is older than the project asks: the line names the
    manifest's build-requires entry that gives it (no compile runs: seconds)."""
    root = copy_tree(PACKAGE, tmp_path / "cmakelibtorch")
    lists = root / "CMakeLists.txt"
    lists.write_text(lists.read_text().replace("VERSION 3.20", "VERSION 3.99", 1))
    out = tmp_path / "out"
    proc = cli("wheel", str(root), "-w", str(out), env=build_env(ARCHGUARD_ARCH_LIST="8.0"))
    assert proc.returncode != 0
    assert "CMake 3.99 or higher is required" in proc.stdout
    assert 'build-requires = ["cmake>=3.99"]' in proc.stdout, proc.stdout


@pytest.mark.slow
@needs_nvcc
@needs_cuda_torch
@needs_cuobjdump
@pytest.mark.skipif(not shutil.which("cmake"), reason="no cmake")
def test_the_build_requires_fix_gives_the_build_that_cmake(tmp_path: Path) -> None:
    """The fix the line names works: pip's cmake, installed for the build, is the cmake its
    setup.py runs by name (the overlay's bin/ first on the build's PATH)."""
    root = copy_tree(PACKAGE, tmp_path / "cmakelibtorch")
    lists = root / "CMakeLists.txt"
    lists.write_text(lists.read_text().replace("VERSION 3.20", "VERSION 3.26", 1))
    out = tmp_path / "out"
    proc = cli(
        "wheel",
        str(root),
        "-w",
        str(out),
        "--build-requires",
        "cmake>=3.26",
        env=build_env(ARCHGUARD_ARCH_LIST="8.0"),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr[-4000:]
    assert wheel_so_targets(only_wheel(out), tmp_path) == ["sm_80", "compute_80"]


def test_a_routine_could_not_find_in_a_build_that_failed_elsewhere_is_no_cause() -> None:
    """torch's CMake files say '-- Could NOT find nvtx3' in every build that has none; a build
    that then fails at its link is not told CMake did not find nvtx3."""
    log = (
        "-- Could NOT find nvtx3 (missing: nvtx3_dir)\n"
        "-- Configuring done\n-- Generating done\n"
        "/usr/bin/ld: k.o: undefined reference to `missing_symbol'\n"
        "collect2: error: ld returned 1 exit status\n"
    )
    line = cause(log.splitlines(), [], {})
    assert not line.startswith("CMake did not find"), line


DOWNLOAD_FAILED = """\
  -- Downloading pybind11
  CMake Error at pybind11-subbuild/download-pybind11-populate.cmake:170 (message):
    Each download failed!

      error: downloading 'https://github.com/pybind/pybind11/archive/v2.6.0.tar.gz' failed
            status_code: 6
            status_string: "Couldn't resolve host name"
            log:
            --- LOG BEGIN ---
            Could not resolve host: github.com
  CMake Error at cmake/Modules/FetchContent.cmake:798 (message):
    Build step for pybind11 failed: 2
  Call Stack (most recent call first):
    cmake/pybind11.cmake:44 (FetchContent_Populate)
  -- Configuring incomplete, errors occurred!
"""


def test_a_download_cmake_could_not_make_names_it_why_and_the_variable_to_give_its_source(
    tmp_path: Path,
) -> None:
    """A setup.py that runs CMake whose FetchContent downloads a dependency while it
    configures, on a builder that cannot reach it: the line names the address, CMake's reason,
    and FETCHCONTENT_SOURCE_DIR_<NAME> in the variable the setup.py hands to CMake."""
    (tmp_path / "setup.py").write_text(
        "import os, subprocess\n"
        "args = os.environ.get('PKG_CMAKE_ARGS', '-DCMAKE_BUILD_TYPE=Release')\n"
        "subprocess.check_call(f'cmake {args} ..', shell=True)\n"
    )
    line = cause(DOWNLOAD_FAILED.splitlines(), [], {}, str(tmp_path))
    assert line is not None
    assert line.startswith("CMake stopped the build, at cmake/Modules/FetchContent.cmake:798")
    assert (
        "download https://github.com/pybind/pybind11/archive/v2.6.0.tar.gz (FetchContent or "
        "ExternalProject) and the download failed (Couldn't resolve host name)"
    ) in line
    assert (
        "-DFETCHCONTENT_SOURCE_DIR_PYBIND11=DIR, a directory holding pybind11's source, in "
        "PKG_CMAKE_ARGS, which its build hands to CMake"
    ) in line
    # the name read by a module of its own that runs CMake for its setup.py
    (tmp_path / "setup.py").write_text("from cmake.ext import BuildExtension\n")
    (tmp_path / "cmake").mkdir()
    (tmp_path / "cmake" / "ext.py").write_text(
        "import os\nargs = os.environ.get('OTHER_CMAKE_ARGS', '')\n"
    )
    beside = cause(DOWNLOAD_FAILED.splitlines(), [], {}, str(tmp_path))
    assert beside is not None and "in OTHER_CMAKE_ARGS, which its build hands to CMake" in beside
    # no setup.py of its own that passes CMake arguments: CMAKE_ARGS
    plain = cause(DOWNLOAD_FAILED.splitlines(), [], {}, "")
    assert plain is not None and "-DFETCHCONTENT_SOURCE_DIR_PYBIND11=DIR" in plain
    assert "in CMAKE_ARGS, in the farm manifest's env table" in plain


def test_the_own_cmake_args_reader_stays_linear_on_hostile_files(tmp_path: Path) -> None:
    """A stranger's Python files, read for a quoted ``*_CMAKE_ARGS`` name: long runs of what
    almost matches, many quotes, many files; each read is bounded and linear."""
    from archguard.frontend.failures import _own_cmake_args

    (tmp_path / "setup.py").write_text("'" + "_CMAKE_ARG" * 100_000)
    (tmp_path / "a.py").write_text("'A" * 300_000)
    for n in range(60):
        (tmp_path / f"d{n}").mkdir()
        (tmp_path / f"d{n}" / "m.py").write_text('"' + "B" * 250_000 + '_CMAKE_ARGS"')
    started = time.process_time()
    found = _own_cmake_args(str(tmp_path))
    assert time.process_time() - started < 1.5
    assert found == []  # every long name is past the bytes read; nothing half-read is named
