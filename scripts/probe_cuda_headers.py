#!/usr/bin/env python3
"""Print defaults/cuda_headers.yml: which headers outside a package define CUDA_VERSION.

Usage: python scripts/probe_cuda_headers.py > src/archguard/defaults/cuda_headers.yml

The lint does not read headers outside a package (the toolkit's, torch's, the C++ library's),
so it cannot see that ``#include <ATen/cuda/CUDAContext.h>`` reaches ``cuda.h``, which
defines CUDA_VERSION, nor that ``#include <cuda_fp16.h>`` does not. This script asks the real
compiler: for each header probed it preprocesses a one-line ``.cu`` that includes it
(``nvcc -E -Xcompiler -dM``, with torch's include directories) and sorts it into the headers
after which CUDA_VERSION is defined and those after which it is not. Probed: the toolkit's
top-level headers, cooperative_groups/, CCCL's entry headers (cub/ two levels, thrust/,
cuda/, cuda/std/, nv/), torch's entry headers and ATen/cuda, c10/cuda, and the C and C++
standard library's headers with a few a CUDA extension commonly includes (pthread.h,
Python.h, pybind11). nvcc's implicit ``cuda_runtime.h`` does not define CUDA_VERSION (the
probe of an empty file says so), so a header is sorted by what it includes itself. The nvcc
found via CUDA_HOME (or PATH) and the torch installed in this Python are the ones probed;
both are named in the output.
"""

from __future__ import annotations

import re
import subprocess
import sys
import sysconfig
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from archguard.detect.nvcc import find_nvcc, probe_toolkit

_DEFINES = re.compile(r"^#define CUDA_VERSION (\d+)$", re.MULTILINE)
_SUFFIXES = (".h", ".hpp", ".cuh")
# torch's headers an extension includes itself (the entry headers and the CUDA-facing ones)
_TORCH_ENTRY = (
    "torch/extension.h",
    "torch/all.h",
    "torch/types.h",
    "torch/python.h",
    "torch/library.h",
    "torch/script.h",
    "ATen/ATen.h",
    "ATen/Dispatch.h",
    "ATen/core/Tensor.h",
    "c10/util/Half.h",
    "c10/util/BFloat16.h",
    "pybind11/pybind11.h",
    "pybind11/numpy.h",
    "pybind11/stl.h",
)
_TORCH_DIRS = ("ATen/cuda", "c10/cuda")
# CCCL (under the toolkit's include/cccl, which nvcc searches): (directory, depth)
_CCCL_DIRS = (("cub", 2), ("thrust", 1), ("cuda", 1), ("cuda/std", 1), ("nv", 1))
# The C++ library's headers (ISO C++ [headers], tables 24-25: C++ and C compatibility
# headers), the C library's (ISO C 7.1.2), and the POSIX and Python ones extensions include.
_STANDARD_NAMES = (
    "algorithm any array atomic barrier bit bitset charconv chrono compare complex concepts "
    "condition_variable coroutine deque exception execution expected filesystem format "
    "forward_list fstream functional future initializer_list iomanip ios iosfwd iostream "
    "istream iterator latch limits list locale map memory memory_resource mutex new numbers "
    "numeric optional ostream queue random ranges ratio regex scoped_allocator semaphore set "
    "shared_mutex source_location span sstream stack stdexcept stop_token streambuf string "
    "string_view syncstream system_error thread tuple type_traits typeindex typeinfo "
    "unordered_map unordered_set utility valarray variant vector version "
    "cassert cctype cerrno cfenv cfloat cinttypes climits clocale cmath csetjmp csignal "
    "cstdarg cstddef cstdint cstdio cstdlib cstring ctime cuchar cwchar cwctype "
    "assert.h ctype.h errno.h fenv.h float.h inttypes.h limits.h locale.h math.h setjmp.h "
    "signal.h stdarg.h stdbool.h stddef.h stdint.h stdio.h stdlib.h string.h time.h uchar.h "
    "wchar.h wctype.h "
    "pthread.h unistd.h dlfcn.h fcntl.h sys/types.h sys/stat.h sys/time.h sys/mman.h "
    "Python.h"
)
_STANDARD = _STANDARD_NAMES.split()


def _defines(nvcc: str, header: str, flags: list[str], work: Path) -> str | None:
    """CUDA_VERSION's value after ``#include <header>``; None: not defined; raises
    ValueError with the compiler's first error when the header does not preprocess alone."""
    source = work / f"{re.sub(r'[^A-Za-z0-9]', '_', header)}.cu"
    source.write_text(f"#include <{header}>\n")
    run = subprocess.run(
        [nvcc, "-E", "-Xcompiler", "-dM", "-std=c++17", *flags, str(source)],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    if run.returncode != 0:
        errors = [line for line in run.stderr.splitlines() if "error" in line]
        first = errors[0] if errors else run.stderr.strip()[:200]
        # the include directory's path differs from machine to machine: cut it off
        raise ValueError(re.sub(r"^\S*?/include/|^\S*?/(?=[^/\s]+:\d+:)", "", first))
    match = _DEFINES.search(run.stdout)
    return match.group(1) if match else None


def _listed(root: Path, sub: str, depth: int, suffixes: tuple[str, ...] | None) -> list[str]:
    """The files under ``root/sub`` up to ``depth`` levels, as include names."""
    names = []
    for path in sorted((root / sub).rglob("*")):
        rel = path.relative_to(root)
        if not path.is_file() or len(rel.parts) - len(Path(sub).parts) > depth:
            continue
        if suffixes is None or path.suffix in suffixes:
            names.append(rel.as_posix())
    return names


def _headers(cuda_include: Path, torch_root: Path) -> dict[str, list[str]]:
    toolkit = sorted(p.name for p in cuda_include.iterdir() if p.suffix in _SUFFIXES)
    toolkit += _listed(cuda_include, "cooperative_groups", 1, None)
    for sub, depth in _CCCL_DIRS:  # cub/*.cuh, thrust/*.h, cuda/barrier (no suffix)...
        suffixes = None if sub.startswith("cuda") else _SUFFIXES
        toolkit += _listed(cuda_include / "cccl", sub, depth, suffixes)
    torch_headers = list(_TORCH_ENTRY)
    for sub in _TORCH_DIRS:
        torch_headers += _listed(torch_root, sub, 1, _SUFFIXES)
    return {"toolkit": toolkit, "torch": torch_headers, "standard": list(_STANDARD)}


def main() -> int:
    import torch
    from torch.utils.cpp_extension import include_paths

    location = find_nvcc()
    toolkit = probe_toolkit(location)
    cuda_include = Path(location.cuda_home) / "include"
    torch_include = [str(p) for p in include_paths()]
    # torch's CUDA wheels bring cuSPARSE, cuBLAS, cuDNN... headers (ATen/cuda includes them);
    # searched after the toolkit's own, as a build whose toolkit lacks them would
    wheels = sorted(Path(torch.__file__).parent.parent.glob("nvidia/*/include"))
    flags = [f"-I{d}" for d in (*torch_include, sysconfig.get_paths()["include"])]
    flags += [f"-Xcompiler=-idirafter{d}" for d in wheels]
    probed = _headers(cuda_include, Path(torch_include[0]))
    found: dict[str, list[str]] = {"toolkit": [], "torch": []}
    undefined: list[str] = []
    values: set[str] = set()
    failed: list[str] = []
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(2) as pool:
        if _defines(location.nvcc, "cuda_runtime.h", flags, Path(tmp)) is not None:
            raise SystemExit("cuda_runtime.h defines CUDA_VERSION: the lint's rule is wrong")
        for kind, headers in probed.items():

            def one(header: str) -> tuple[str, str | None, str | None]:
                try:
                    return header, _defines(location.nvcc, header, flags, Path(tmp)), None
                except ValueError as exc:
                    return header, None, str(exc)

            for header, value, error in pool.map(one, headers):
                if error is not None:
                    failed.append(f"{header}: {error}")
                elif value is None:
                    undefined.append(header)
                else:
                    found[kind].append(header)
                    values.add(value)
    counts = ", ".join(f"{len(v)} {k}" for k, v in probed.items())
    print(
        f"""# Headers outside a package and what they do to CUDA_VERSION. The lint does not read
# them; where a translation unit includes one of `toolkit` or `torch`, CUDA_VERSION is the
# toolkit's version ({"/".join(sorted(values))} here); after one of `undefined` it is still
# undefined (0 in #if, as nvcc's implicit cuda_runtime.h leaves it); a header in none of
# the lists may define it, so a guard on CUDA_VERSION after it stays undecided.
# Generated by scripts/probe_cuda_headers.py with the real compiler, preprocessing
# `#include <HEADER>` alone (nvcc -E -Xcompiler -dM) for {counts} headers:
#   toolkit: {toolkit.source}
#   torch: {torch.__version__}"""
    )
    for line in failed:
        print(f"# Not probed (does not preprocess alone): {line}")
    print("schema: 2")
    for kind, names in (*found.items(), ("undefined", undefined)):
        print(f"{kind}:")
        for header in names:
            print(f"  - {header}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
