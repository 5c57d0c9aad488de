"""`archguard wheel` on build systems its setuptools hook never sees (issue 41): a
scikit-build-core CMake extension and a setup.py that drives CMake with
``find_package(Torch)``, built with real nvcc 13.0 (a toolkit without cuBLAS), torch
2.13.0+cu130's NVIDIA wheels, real CMake and scikit-build-core, read back with real
cuobjdump. Kernels carry no torch headers: each build takes seconds."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from realtools import (
    CUDA_HOME,
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

pytestmark = [
    pytest.mark.slow,
    needs_nvcc,
    needs_cuda_torch,
    needs_cuobjdump,
    pytest.mark.skipif(not shutil.which("cmake"), reason="no cmake"),
]

PACKAGES = REPO / "tests" / "packages"


def skbuild(tmp: Path, cmake_extra: str = "") -> Path:
    pytest.importorskip("scikit_build_core")
    root = copy_tree(PACKAGES / "skbuild", tmp / "skbuild")
    if cmake_extra:
        text = (root / "CMakeLists.txt").read_text()
        (root / "CMakeLists.txt").write_text(
            text.replace("add_library(", f"{cmake_extra}\nadd_library(", 1)
        )
    return root


def wheel(root: Path, out: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return cli("wheel", str(root), "-w", str(out), *args, env=build_env(**env))


def test_a_scikit_build_core_package_is_built_recorded_verified_labelled_and_repaired(
    tmp_path: Path,
) -> None:
    """The front-end puts the list in the build's environment, writes the record the hook
    would have written (the backend wrote none), and the wheel goes through the read-back,
    the label and auditwheel like a setuptools one."""
    root = skbuild(tmp_path)
    out = tmp_path / "out"
    proc = wheel(root, out, "--repair", ARCHGUARD_ARCH_LIST="8.0;9.0")
    assert proc.returncode == 0, proc.stdout + proc.stderr[-4000:]
    assert re.search(
        r"^ok  skbuildcuda-1\.0\+cu130-.*manylinux.*\.whl  sm_80 sm_90 compute_90$",
        proc.stdout,
        re.M,
    ), proc.stdout
    assert "archguard's hook never saw (its backend, scikit_build_core.build" in proc.stderr
    built = only_wheel(out)
    assert wheel_so_targets(built, tmp_path) == ["sm_80", "sm_90", "compute_90"]
    record = wheel_record(built)
    build = record["build"]
    assert isinstance(build, dict)
    assert build["activation"] == "frontend"
    assert build["cudaarchs"] == "80-real;90"
    (ext,) = build["extensions"]
    assert ext["file"] == "skbuildcuda/libskbuildcuda_k.so" and ext["nvcc_line_seen"] is False
    assert "libc.so.6" in ext["abi"]["needed"]  # read from its ELF (cudart linked statically)
    assert build["frontend"]["build_requirements"]["backend"] == "scikit_build_core.build"
    verify = cli("verify", str(built))
    assert verify.returncode == 0 and "result: OK (1 CUDA binary checked" in verify.stdout


def test_a_setup_py_driving_cmake_with_find_package_torch_builds_on_the_nvcc_only_toolkit(
    tmp_path: Path,
) -> None:
    """torch's CMake files need one toolkit root; the project links cuBLAS, which this
    toolkit lacks and torch's NVIDIA wheels have. Without archguard the build stops in
    CMake; with it the front-end's assembled root serves FindCUDA, find_package(CUDAToolkit)
    and the link, and the wheel holds exactly the list (from TORCH_CUDA_ARCH_LIST, which
    torch's cuda.cmake reads)."""
    root = copy_tree(PACKAGES / "cmaketorch", tmp_path / "cmaketorch")
    lacks_cublas = not any(
        (Path(CUDA_HOME) / d / "cublas_v2.h").is_file()
        for d in ("include", "targets/x86_64-linux/include")
    )
    if lacks_cublas:  # the failure archguard's root removes, without archguard
        other = copy_tree(PACKAGES / "cmaketorch", tmp_path / "plain" / "cmaketorch")
        plain = pip_wheel(other, tmp_path / "plain", env=build_env(TORCH_CUDA_ARCH_LIST="8.0"))
        assert plain.returncode != 0
        # FindCUDA takes the nvcc on PATH; with a full toolkit there, the cuBLAS link
        assert re.search(r"Could NOT find CUDA|CUDA::cublas", plain.stdout + plain.stderr)
    out = tmp_path / "out"
    proc = wheel(root, out, ARCHGUARD_ARCH_LIST="8.0;9.0")
    assert proc.returncode == 0, proc.stdout + proc.stderr[-4000:]
    built = only_wheel(out)
    assert wheel_so_targets(built, tmp_path) == ["sm_80", "sm_90", "compute_90"]
    build = wheel_record(built)["build"]
    assert isinstance(build, dict)
    assert build["activation"] == "environment"  # the hook ran, and saw the CMake step
    toolkit = build["frontend"]["toolkit"]
    if lacks_cublas:
        assembled = toolkit["assembled"]
        assert "libcublas.so" in assembled["libraries_from_wheels"]
        assert "cublas_v2.h" in assembled["headers_from_wheels"]
        # the record is path-free (the root by its major); the log names the root built in
        assert toolkit["root"] == "{archguard-cache}/cuda-root/cuda-13"
        found = re.search(r"every build system gets one root, (/\S+),", proc.stderr)
        assert found, proc.stderr[-3000:]
        assert Path(found[1], "lib64", "libcublas.so").resolve().is_file()
        assert f"-DCMAKE_CUDA_COMPILER={found[1]}/bin/nvcc" in proc.stderr
        assert "every build system gets one root" in proc.stderr


def test_cmake_files_that_force_their_arches_are_named_with_their_lines(tmp_path: Path) -> None:
    """-gencode in CMAKE_CUDA_FLAGS that adds an arch outside the list is refused before the
    build, naming the line; an arch a function of the package picks (50, gone in CUDA 13) is
    followed through the function and refused before anything compiles, naming the line."""
    flags = skbuild(
        tmp_path / "a", 'string(APPEND CMAKE_CUDA_FLAGS " -gencode arch=compute_86,code=sm_86")'
    )
    proc = wheel(flags, tmp_path / "out-a", ARCHGUARD_ARCH_LIST="8.0")
    assert proc.returncode == 1, proc.stdout + proc.stderr[-3000:]
    # a literal -gencode outside the list is refused before anything compiles (issue 58)
    assert "refused before building (no nvcc ran)" in proc.stdout, proc.stdout
    assert "CMakeLists.txt:3: " in proc.stdout and "sm_86" in proc.stdout, proc.stdout
    assert not list((tmp_path / "out-a").glob("**/*.whl"))
    picked = skbuild(
        tmp_path / "b",
        "function(pick_arches out)\n  set(${out} 50 PARENT_SCOPE)\nendfunction()\n"
        "pick_arches(ARCH)\nset(CMAKE_CUDA_ARCHITECTURES ${ARCH})",
    )
    proc = wheel(picked, tmp_path / "out-b", ARCHGUARD_ARCH_LIST="8.0")
    assert proc.returncode == 1, proc.stdout + proc.stderr[-3000:]
    # the reader follows the package's function (issue 58): refused before nvcc runs
    assert "refused before building (no nvcc ran)" in proc.stdout, proc.stdout
    said = "CMakeLists.txt:7: set(CMAKE_CUDA_ARCHITECTURES ${ARCH}) (gives 50)"
    assert said in proc.stdout, proc.stdout
    # a default guarded for builds that give none is left to CUDAARCHS, and not named
    guarded = skbuild(
        tmp_path / "c",
        "if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)\n  set(CMAKE_CUDA_ARCHITECTURES 50)\nendif()",
    )
    proc = wheel(guarded, tmp_path / "out-c", ARCHGUARD_ARCH_LIST="8.0")
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]


def wheel_logging_nvcc(root: Path, out: Path, ran: Path) -> subprocess.CompletedProcess[str]:
    """``archguard wheel ROOT`` with list 8.0, its CMake's CUDA compiler (CUDACXX) a script
    that logs each nvcc command line to ``ran``."""
    nvcc = ran.with_name("nvcc")
    nvcc.write_text(f'#!/bin/sh\necho "$@" >> {ran}\nexec {CUDA_HOME}/bin/nvcc "$@"\n')
    nvcc.chmod(0o755)
    env = build_env(ARCHGUARD_ARCH_LIST="8.0", CUDACXX=str(nvcc))
    return cli("wheel", str(root), "-w", str(out), "--format", "json", env=env)


def test_a_packages_own_arch_variable_in_its_cmake_files_gets_the_list(tmp_path: Path) -> None:
    """Its CMakeLists reads MYPKG_CUDA_ARCHITECTURES (a literal default of six arches) and
    forces it over CUDAARCHS, as a cache entry with FORCE and as the target's property:
    archguard sets the variable to the list in that default's spelling, said and recorded,
    and nvcc compiles that list alone (CUDACXX, a script, logs each nvcc command)."""
    pytest.importorskip("scikit_build_core")
    root = copy_tree(PACKAGES / "skbuildenv", tmp_path / "skbuildenv")
    out, ran = tmp_path / "out", tmp_path / "nvcc-ran.log"
    proc = wheel_logging_nvcc(root, out, ran)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-4000:]
    assert (
        "its CMake files read MYPKG_CUDA_ARCHITECTURES, an arch variable (default "
        "'75;80;86;89;90;120', CMakeLists.txt:7): set to the effective list in that spelling, "
        "MYPKG_CUDA_ARCHITECTURES='80'"
    ) in proc.stderr
    (build,) = json.loads(proc.stdout)["builds"]
    assert build["ok"] and build["environment"]["MYPKG_CUDA_ARCHITECTURES"] == "80"
    built = only_wheel(out)
    assert wheel_so_targets(built, tmp_path) == ["sm_80", "compute_80"]
    compiles = [line for line in ran.read_text().splitlines() if "kernel.cu" in line]
    assert compiles and all("arch=compute_80" in line for line in compiles), compiles
    assert not re.search(r"compute_(?:75|86|89|90|120)\b", "\n".join(compiles)), compiles
    verify = cli("verify", str(built))
    assert verify.returncode == 0 and "result: OK (1 CUDA binary checked" in verify.stdout


def test_an_arch_variable_read_through_a_loop_over_option_names_builds_exactly_the_list(
    tmp_path: Path,
) -> None:
    """Its CMakeLists reads every option from the environment in a foreach() over their names
    (``set(${_opt} "$ENV{${_opt}}")``), then CMAKE_CUDA_ARCHITECTURES from PKG_CUDA_ARCHS,
    else a literal list of eight: archguard sets PKG_CUDA_ARCHS before CMake runs, says so,
    and nvcc compiles the list alone (one target, not eight)."""
    pytest.importorskip("scikit_build_core")
    root = copy_tree(PACKAGES / "skbuildloop", tmp_path / "skbuildloop")
    out, ran = tmp_path / "out", tmp_path / "nvcc-ran.log"
    proc = wheel_logging_nvcc(root, out, ran)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-4000:]
    assert (
        "its CMake files read PKG_CUDA_ARCHS, an arch variable (default '', CMakeLists.txt:8): "
        "set to the effective list in that spelling, PKG_CUDA_ARCHS='80'"
    ) in proc.stderr
    (build,) = json.loads(proc.stdout)["builds"]
    assert build["ok"] and build["environment"]["PKG_CUDA_ARCHS"] == "80"  # 8.0 and its PTX
    assert wheel_so_targets(only_wheel(out), tmp_path) == ["sm_80", "compute_80"]
    compiles = [line for line in ran.read_text().splitlines() if "kernel.cu" in line]
    assert compiles and all("arch=compute_80" in line for line in compiles), compiles
    assert not re.search(r"compute_(?:70|75|86|89|90|100|120)\b", "\n".join(compiles))


def test_an_arch_cache_entry_is_given_a_define_and_builds_exactly_the_list(
    tmp_path: Path,
) -> None:
    """A cache entry with a literal default of its own (no environment read) that becomes
    CMAKE_CUDA_ARCHITECTURES: archguard puts -DPKG_ARCHS=list first in CMAKE_ARGS, which
    scikit-build-core passes to CMake, and the wheel holds the list alone."""
    root = skbuild(
        tmp_path,
        'set(PKG_ARCHS "70;75;86;90" CACHE STRING "arches")\n'
        "set(CMAKE_CUDA_ARCHITECTURES ${PKG_ARCHS})",
    )
    out = tmp_path / "out"
    proc = wheel(root, out, ARCHGUARD_ARCH_LIST="8.0")
    assert proc.returncode == 0, proc.stdout + proc.stderr[-4000:]
    assert "its CMake files take PKG_ARCHS, a cache entry that reaches the arches" in proc.stderr
    assert "-DPKG_ARCHS=80 goes first in CMAKE_ARGS" in proc.stderr
    assert wheel_so_targets(only_wheel(out), tmp_path) == ["sm_80", "compute_80"]


def test_a_default_set_before_cuda_is_enabled_builds_exactly_the_list(tmp_path: Path) -> None:
    """``if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES) set(... "52;61;70")`` ahead of
    ``enable_language(CUDA)``, as ggml-era packages write it: CUDAARCHS is read only as CUDA
    is enabled, so the default stood and nvcc 13 stopped ("Unsupported gpu architecture
    'compute_52'"). archguard gives the list as -DCMAKE_CUDA_ARCHITECTURES first in
    CMAKE_ARGS, which scikit-build-core passes to CMake: the wheel holds the list alone."""
    root = skbuild(tmp_path)
    (root / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.20)\n"
        "project(skbuildcuda LANGUAGES C)\n"
        "if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)\n"
        '  set(CMAKE_CUDA_ARCHITECTURES "52;61;70")\n'
        "endif()\n"
        "enable_language(CUDA)\n"
        "add_library(skbuildcuda_k SHARED kernel.cu)\n"
        "install(TARGETS skbuildcuda_k LIBRARY DESTINATION skbuildcuda)\n"
    )
    out = tmp_path / "out"
    proc = wheel(root, out, ARCHGUARD_ARCH_LIST="8.0")
    assert proc.returncode == 0, proc.stdout + proc.stderr[-4000:]
    assert "its CMake files set a default of CMAKE_CUDA_ARCHITECTURES (CMakeLists.txt:4" in (
        proc.stderr
    )
    assert "-DCMAKE_CUDA_ARCHITECTURES=80 goes first in CMAKE_ARGS" in proc.stderr
    assert wheel_so_targets(only_wheel(out), tmp_path) == ["sm_80", "compute_80"]


OPTIONAL_CUDA = """\
cmake_minimum_required(VERSION 3.20)
project(optcuda LANGUAGES C)
# As many CMake projects do: CUDA where CMake finds a compiler, a CPU library otherwise.
include(CheckLanguage)
check_language(CUDA)
if(CMAKE_CUDA_COMPILER)
  enable_language(CUDA)
  add_library(skbuildcuda_k SHARED kernel.cu)
else()
  file(WRITE ${CMAKE_BINARY_DIR}/cpu.c "int skbuildcuda_cpu(void) { return 0; }\\n")
  add_library(skbuildcuda_k SHARED ${CMAKE_BINARY_DIR}/cpu.c)
endif()
install(TARGETS skbuildcuda_k LIBRARY DESTINATION skbuildcuda)
"""


def test_a_cmake_backend_that_finds_no_nvcc_is_the_no_cuda_code_failure_in_cmakes_words(
    tmp_path: Path,
) -> None:
    """A stale CUDACXX (the caller's wins over archguard's) hides nvcc from CMake: the
    project builds its CPU library, and the refusal quotes what CMake said."""
    root = skbuild(tmp_path)
    (root / "CMakeLists.txt").write_text(OPTIONAL_CUDA)
    proc = wheel(root, tmp_path / "out", ARCHGUARD_ARCH_LIST="8.0", CUDACXX="/nonexistent/nvcc")
    assert proc.returncode == 1, proc.stdout + proc.stderr[-3000:]
    assert "your CUDACXX='/nonexistent/nvcc' wins" in proc.stderr
    assert "holds no CUDA device code" in proc.stdout
    assert "CMake said: 'Looking for a CUDA compiler - NOTFOUND'" in proc.stdout


def test_an_nvcc_on_path_that_is_a_wrapper_script_names_the_toolkit_behind_it(
    tmp_path: Path,
) -> None:
    """A wrapper script on PATH (``exec /usr/local/cuda-13.0/bin/nvcc "$@"``): the toolkit is
    the one it runs, not the directory above the script."""
    from archguard.detect.nvcc import find_nvcc

    real = Path(CUDA_HOME, "bin", "nvcc").resolve()
    bindir = tmp_path / "bin"
    bindir.mkdir()
    wrapper = bindir / "nvcc"
    wrapper.write_text(f'#!/bin/sh\nexec {real} "$@"\n')
    wrapper.chmod(0o755)
    found = find_nvcc({"PATH": str(bindir)}, which=lambda _: str(wrapper))
    assert found.nvcc == str(real)
    assert found.cuda_home == str(real.parent.parent)
    assert found.how == f"PATH: {wrapper} runs {real}"
    assert Path(found.cuda_home, "include", "cuda_runtime.h").is_file()
    # what torch would take (the directory above the script) has no toolkit
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_HOME", "CUDA_PATH")}
    env["PATH"] = f"{bindir}{os.pathsep}{env['PATH']}"
    proc = subprocess.run(
        [sys.executable, "-m", "archguard", "explain", "--format", "json"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert str(real) in proc.stdout


def test_a_packages_own_arch_variable_gets_the_list_in_its_own_spelling(tmp_path: Path) -> None:
    """Its setup.py passes CUDA_ARCHS (default 75;80) to CMake as -D, which wins over
    CUDAARCHS: archguard learns the spelling from the default and sets it, said and
    recorded; the wheel holds exactly the list."""
    root = copy_tree(PACKAGES / "cmakearch", tmp_path / "cmakearch")
    out = tmp_path / "out"
    proc = cli(
        "wheel",
        str(root),
        "-w",
        str(out),
        "--format",
        "json",
        env=build_env(ARCHGUARD_ARCH_LIST="8.0;9.0"),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr[-4000:]
    assert (
        "its setup.py reads CUDA_ARCHS, an arch variable (default '75;80'): set to the "
        "effective list in that spelling, CUDA_ARCHS='80-real;90'"
    ) in proc.stderr
    (build,) = json.loads(proc.stdout)["builds"]
    assert build["environment"]["CUDA_ARCHS"] == "80-real;90"
    assert wheel_so_targets(only_wheel(out), tmp_path) == ["sm_80", "sm_90", "compute_90"]
    # the caller's value wins, and is said to
    mine = cli(
        "wheel",
        str(root),
        "-w",
        str(tmp_path / "mine"),
        env=build_env(ARCHGUARD_ARCH_LIST="8.0;9.0", CUDA_ARCHS="80-real;90"),
    )
    assert "your CUDA_ARCHS wins" in mine.stderr and mine.returncode == 0
