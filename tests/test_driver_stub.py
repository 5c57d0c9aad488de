"""archguard.detect.driver_stub and the toolkit root's generated ``lib64/stubs/libcuda.so``
(issue 58): the reader of ``cuda.h`` on the real header and on hostile input (linear time),
a real compile with the machine's C compiler (soname, exports, a driver API program that
links against it; never run), the assembled root's stub (generated, the toolkit's own kept,
the wheels' preferred), and CMake's ``CUDA::cuda_driver`` finding it in the real root."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest

from archguard.detect.cudalibs import STUB_NOTE, assemble_root, nvidia_roots
from archguard.detect.driver_stub import (
    SONAME,
    c_compiler,
    driver_symbols,
    make_driver_stub,
    stub_source,
)
from realtools import CUDA_HOME, needs_nvcc
from test_cmake_torch import toolkit_root

needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="no gcc on PATH")
needs_binutils = pytest.mark.skipif(
    not (shutil.which("readelf") and shutil.which("nm")), reason="no readelf or nm"
)


def real_cuda_h() -> Path | None:
    """The ``cuda.h`` an assembled root would have: the toolkit's, else torch's wheels'."""
    found = [Path(CUDA_HOME) / "include" / "cuda.h"]
    for root in nvidia_roots():
        found += sorted(root.glob("*/include/cuda.h"))
    return next((path for path in found if path.is_file()), None)


REAL = real_cuda_h()
needs_cuda_h = pytest.mark.skipif(REAL is None, reason="no cuda.h (toolkit or torch's wheels)")

HEADER = """\
#define CUDAAPI
typedef int CUresult;
typedef unsigned int cuuint32_t;
#define __CUDA_API_PTDS(api) api ## _ptds
#define __CUDA_API_PTSZ(api) api ## _ptsz
#define cuCtxCreate cuCtxCreate_v4
#define cuMemcpyHtoD __CUDA_API_PTDS(cuMemcpyHtoD_v2)
  #  define cuStreamQuery   __CUDA_API_PTSZ( cuStreamQuery )
/* \\sa ::cuOnlyInAComment(), cuAlsoOnlyInAComment */
// ::cuInALineComment()
CUresult CUDAAPI cuInit(unsigned int Flags);
CUresult CUDAAPI cuDeviceGetCount(int *count);
CUresult CUDAAPI cuCtxCreate_v4(void **pctx, void *params, unsigned int flags, int dev);
CUresult CUDAAPI cuMemcpyHtoD_v2(unsigned long long dst, const void *src, size_t n);
CUresult CUDAAPI cuStreamQuery
    (void *hStream);
typedef struct CUstream_st *CUstream;
"""


# --- the reader ---------------------------------------------------------------------------


def test_the_reader_takes_declared_defined_and_pasted_names_and_skips_comments() -> None:
    assert driver_symbols(HEADER) == (
        "cuCtxCreate",
        "cuCtxCreate_v4",
        "cuDeviceGetCount",
        "cuInit",
        "cuMemcpyHtoD",
        "cuMemcpyHtoD_v2",
        "cuMemcpyHtoD_v2_ptds",
        "cuStreamQuery",
        "cuStreamQuery_ptsz",
    )
    assert driver_symbols("/* cuInit(unclosed") == ()
    assert driver_symbols("") == ()


@needs_cuda_h
def test_the_reader_on_the_real_cuda_h() -> None:
    assert REAL is not None
    names = driver_symbols(REAL.read_text(encoding="utf-8"))
    assert list(names) == sorted(set(names))
    for name in (
        "cuInit",
        "cuDeviceGetCount",
        "cuCtxCreate",
        "cuCtxCreate_v2",  # the unversioned names' older versions, still exported
        "cuGetProcAddress_v2",
        "cuMemcpyHtoD_v2",
        "cuMemcpyHtoD_v2_ptds",  # CUDA_API_PER_THREAD_DEFAULT_STREAM's names
        "cuMemcpyHtoDAsync_v2_ptsz",
        "cuLaunchKernel_ptsz",
    ):
        assert name in names, name
    assert not {"CUresult", "CUstream", "cuuint32_t", "CUDAAPI"} & set(names)
    assert all(name.startswith("cu") and name[2].isupper() for name in names)


HOSTILE = {
    "a 5 MB name": "cu" + "A" * 5_000_000,
    "5 MB of names": "cuAb " * 1_000_000,
    "5 MB of names and parentheses": "cuA (" * 1_000_000,
    "10^5 defines": "#define cuA cuB_v2\n" * 100_000,
    "10^5 defines without an end": "  #  define " * 100_000,
    "unclosed comments": "/*" * 1_000_000,
    "comment ends": "*/" * 1_000_000,
    "slashes": "/a" * 1_000_000 + "//" * 1_000_000,
    "a pasting without its name": "__CUDA_API_PTDS(" + " " * 2_000_000,
    "pastings": "__CUDA_API_PTSZ( \t" * 200_000,
    "space after a name": "cuInit" + " " * 5_000_000,
}


@pytest.mark.parametrize("text", HOSTILE.values(), ids=HOSTILE.keys())
def test_the_reader_runs_in_linear_time_on_hostile_input(text: str) -> None:
    start = time.process_time()
    driver_symbols(text)
    assert time.process_time() - start < 1.5


def test_the_stub_source_returns_the_stub_librarys_error_from_every_function() -> None:
    source = stub_source(("cuInit", "cuMemcpyHtoD_v2_ptds"))
    assert "int cuInit(void) { return 34; }" in source
    assert "int cuMemcpyHtoD_v2_ptds(void) { return 34; }" in source


def test_the_c_compiler_is_the_callers_then_cc_then_cc_on_path(tmp_path: Path) -> None:
    assert c_compiler("clang -m64") == ["clang", "-m64"]
    assert c_compiler(environ={"CC": "ccache gcc", "PATH": ""}) == ["ccache", "gcc"]
    assert c_compiler(environ={"PATH": str(tmp_path)}) is None
    (tmp_path / "gcc").write_text("#!/bin/sh\n")
    (tmp_path / "gcc").chmod(0o755)
    assert c_compiler(environ={"CC": " ", "PATH": str(tmp_path)}) == [str(tmp_path / "gcc")]


def test_no_stub_without_a_compiler_or_from_a_failed_compile(tmp_path: Path) -> None:
    header = tmp_path / "include" / "cuda.h"
    header.parent.mkdir()
    header.write_text(HEADER)
    none = make_driver_stub(header, tmp_path / "a", environ={"PATH": str(tmp_path / "empty")})
    assert none.library is None and "no C compiler" in none.reason
    assert none.said.startswith("no driver stub: ")
    failed = make_driver_stub(header, tmp_path / "b", compiler="false")
    assert failed.library is None and failed.reason == "false failed (exit 1)"
    assert list((tmp_path / "b").iterdir()) == []  # its C file went with its directory
    missing = make_driver_stub(header, tmp_path / "c", compiler=str(tmp_path / "no-cc"))
    assert missing.library is None and "could not run" in missing.reason
    (tmp_path / "other.h").write_text("int cuSomething(void);\n")
    other = make_driver_stub(tmp_path / "other.h", tmp_path / "d", compiler="false")
    assert other.library is None and "declares no cuInit" in other.reason


# --- a real compile -----------------------------------------------------------------------


def exported(library: Path) -> set[str]:
    out = subprocess.run(
        ["nm", "-D", "--defined-only", str(library)], capture_output=True, text=True, check=True
    ).stdout
    return {line.split()[-1] for line in out.splitlines() if line.split()[1:2] == ["T"]}


def soname(library: Path) -> str:
    out = subprocess.run(
        ["readelf", "-d", str(library)], capture_output=True, text=True, check=True
    ).stdout
    line = next(line for line in out.splitlines() if "(SONAME)" in line)
    return line.split("[", 1)[1].rstrip("]")


@needs_cuda_h
@needs_gcc
@needs_binutils
def test_a_stub_from_the_real_cuda_h_links_a_driver_api_program(tmp_path: Path) -> None:
    assert REAL is not None
    made = make_driver_stub(REAL, tmp_path / "stubs", compiler="gcc")
    assert made.library == tmp_path / "stubs" / "libcuda.so", made.reason
    assert sorted(p.name for p in (tmp_path / "stubs").iterdir()) == ["libcuda.so"]
    assert soname(made.library) == SONAME == "libcuda.so.1"
    names = exported(made.library)
    assert {"cuInit", "cuCtxCreate_v2", "cuDeviceGetCount", "cuMemcpyHtoD_v2_ptds"} <= names
    assert made.functions == len(names)
    # the same header gives the same bytes
    again = make_driver_stub(REAL, tmp_path / "again", compiler="gcc")
    assert again.library is not None
    assert again.library.read_bytes() == made.library.read_bytes()
    program = tmp_path / "p.c"
    program.write_text(
        "#include <cuda.h>\n"
        "int main(void) {\n"
        "    int n = 0;\n"
        "    if (cuInit(0) != CUDA_SUCCESS) return 1;\n"
        "    return cuDeviceGetCount(&n) == CUDA_SUCCESS ? 0 : 1;\n"
        "}\n"
    )
    stubs, out = tmp_path / "stubs", tmp_path / "p"
    linked = subprocess.run(
        ["gcc", f"-I{REAL.parent}", str(program), f"-L{stubs}", "-lcuda", "-o", str(out)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert linked.returncode == 0, linked.stderr
    # it needs the real driver where it runs (never run here)
    needed = subprocess.run(
        ["readelf", "-d", str(tmp_path / "p")], capture_output=True, text=True, check=True
    ).stdout
    assert "Shared library: [libcuda.so.1]" in needed


# --- the assembled toolkit root -----------------------------------------------------------


def wheels(tmp: Path, header: str | None = HEADER) -> Path:
    """torch's NVIDIA wheels' directory: a cuBLAS to add, and a cuda.h where given."""
    nvidia = tmp / "nvidia"
    (nvidia / "cu13" / "lib").mkdir(parents=True)
    (nvidia / "cu13" / "include").mkdir()
    (nvidia / "cu13" / "lib" / "libcublas.so.13").write_text("")
    if header is not None:
        (nvidia / "cu13" / "include" / "cuda.h").write_text(header)
    return nvidia


@needs_gcc
@needs_binutils
def test_the_assembled_root_gains_a_generated_driver_stub(tmp_path: Path) -> None:
    home = toolkit_root(tmp_path, "bin/nvcc", "include/cuda_runtime.h", "lib64/libcudart.so")
    nvidia = wheels(tmp_path)
    made = assemble_root(str(home), 13, tmp_path / "roots", roots=[nvidia])
    assert made is not None and made.stub is not None and made.stub.made, made
    stub = made.root / "lib64" / "stubs" / "libcuda.so"
    assert stub.is_file() and not stub.is_symlink()
    assert soname(stub) == "libcuda.so.1"
    assert {"cuInit", "cuMemcpyHtoD_v2_ptds"} <= exported(stub)
    assert "stubs" in made.libraries and "libcublas.so" in made.libraries
    header = (nvidia / "cu13" / "include" / "cuda.h").resolve()
    assert made.stub.header == str(header) and made.stub.header_of == "wheels"
    assert made.stub.line().startswith(f"lib64/stubs/libcuda.so generated from {header}: 9 ")
    assert made.record()["driver_stub"] == {
        "generated": True,
        "from": "include/cuda.h (the wheels')",
        "said": made.stub.said,
    }
    assert not list(made.root.rglob(".libcuda-stub-*"))  # nothing of the compile is left
    # kept: found again, saying the same
    again = assemble_root(str(home), 13, tmp_path / "roots", roots=[nvidia])
    assert again == made
    # the toolkit's own cuda.h comes first
    (home / "include" / "cuda.h").write_text(HEADER)
    own = assemble_root(str(home), 13, tmp_path / "roots", roots=[nvidia])
    assert own is not None and own.stub is not None and own.stub.header_of == "toolkit"
    assert own.stub.record()["from"] == "include/cuda.h (the toolkit's)"
    assert own.root != made.root


def test_a_failed_stub_leaves_the_root_without_one_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = toolkit_root(tmp_path, "bin/nvcc", "include/cuda_runtime.h")
    nvidia = wheels(tmp_path)
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    made = assemble_root(str(home), 13, tmp_path / "roots", roots=[nvidia])
    assert made is not None and made.stub is not None and not made.stub.made
    assert not (made.root / "lib64" / "stubs").exists()
    assert "stubs" not in made.libraries
    assert "could not run" in made.stub.said
    assert made.stub.line().startswith("lib64/stubs/libcuda.so not generated from ")
    assert made.record()["driver_stub"] == {
        "generated": False,
        "from": "include/cuda.h (the wheels')",
        "said": made.stub.said,
    }
    assert (made.root / STUB_NOTE).read_text().strip() == made.stub.said
    # another compiler is another root: a root made without a stub is not kept for it
    monkeypatch.setenv("CC", "false")
    other = assemble_root(str(home), 13, tmp_path / "roots", roots=[nvidia])
    assert other is not None and other.root != made.root
    assert other.stub is not None and other.stub.said == "false failed (exit 1)"


def test_the_toolkits_own_stubs_and_the_wheels_stub_come_before_a_generated_one(
    tmp_path: Path,
) -> None:
    home = toolkit_root(tmp_path, "bin/nvcc", "include/cuda_runtime.h")
    nvidia = wheels(tmp_path)
    (nvidia / "cu13" / "lib" / "stubs").mkdir()
    (nvidia / "cu13" / "lib" / "stubs" / "libcuda.so").write_text("wheel")
    made = assemble_root(str(home), 13, tmp_path / "roots", roots=[nvidia])
    assert made is not None and made.stub is None and "stubs" in made.libraries
    assert (made.root / "lib64" / "stubs" / "libcuda.so").read_text() == "wheel"
    assert made.record()["driver_stub"] is None
    (home / "lib" / "stubs").mkdir(parents=True)
    (home / "lib" / "stubs" / "libcuda.so").write_text("toolkit")
    own = assemble_root(str(home), 13, tmp_path / "roots", roots=[nvidia])
    assert own is not None and own.stub is None and "stubs" not in own.libraries
    assert (own.root / "lib64" / "stubs" / "libcuda.so").read_text() == "toolkit"


def test_no_stub_is_generated_without_a_cuda_h(tmp_path: Path) -> None:
    home = toolkit_root(tmp_path, "bin/nvcc", "include/cuda_runtime.h")
    made = assemble_root(str(home), 13, tmp_path / "roots", roots=[wheels(tmp_path, None)])
    assert made is not None and made.stub is None
    assert not (made.root / "lib64" / "stubs").exists()


# --- CMake's CUDA::cuda_driver in the real root ------------------------------------------

CMAKELISTS = """\
cmake_minimum_required(VERSION 3.17)
project(x LANGUAGES C)
find_package(CUDAToolkit REQUIRED)
get_target_property(driver CUDA::cuda_driver IMPORTED_LOCATION)
message(STATUS "cuda_driver: ${driver}")
add_executable(p p.c)
target_link_libraries(p CUDA::cuda_driver)
"""


@needs_gcc
@needs_nvcc  # run for its paths and version only (-v, --version): no CUDA compile
@pytest.mark.skipif(not shutil.which("cmake"), reason="no cmake")
def test_cmake_finds_the_generated_stub_as_cuda_driver(tmp_path: Path) -> None:
    """The real toolkit completed by torch's real wheels: find_package(CUDAToolkit) with
    CUDAToolkit_ROOT at the root (it runs nvcc only to ask its paths, no CUDA compile) finds
    CUDA::cuda_driver in lib64/stubs, and a C program links against it (never run)."""
    roots = nvidia_roots()
    major = 13 if any((root / "cu13").is_dir() for root in roots) else 12
    made = assemble_root(CUDA_HOME, major, tmp_path / "roots", roots=roots)
    if made is None:
        pytest.skip(f"{CUDA_HOME} lacks nothing torch's NVIDIA wheels have: no root assembled")
    stub = made.root / "lib64" / "stubs" / "libcuda.so"
    assert stub.exists(), made.stub
    source = tmp_path / "src"
    source.mkdir()
    (source / "CMakeLists.txt").write_text(CMAKELISTS)
    (source / "p.c").write_text(
        "#include <cuda.h>\nint main(void) { return cuInit(0) == CUDA_SUCCESS ? 0 : 1; }\n"
    )
    build = tmp_path / "build"
    configure = subprocess.run(
        ["cmake", "-S", str(source), "-B", str(build), f"-DCUDAToolkit_ROOT={made.root}"],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert configure.returncode == 0, configure.stdout + configure.stderr
    found = next(
        line.split("cuda_driver: ", 1)[1]
        for line in configure.stdout.splitlines()
        if "cuda_driver: " in line
    )
    # lib/stubs or lib64/stubs of the root (lib is lib64): the generated stub
    assert found.startswith(f"{made.root}/"), found
    assert Path(found).resolve() == stub.resolve(), found
    built = subprocess.run(
        ["cmake", "--build", str(build)], capture_output=True, text=True, check=False, timeout=300
    )
    assert built.returncode == 0, built.stdout + built.stderr
