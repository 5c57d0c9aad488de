#!/usr/bin/env python3
"""What archguard's flags for the same bytes cost (issue 50), measured side by side in one
run: one ``.cu`` with torch's headers (benchmarks/speedpkg's elementwise.cu), compiled by
the real nvcc for one arch as torch's BuildExtension compiles it, with and without the flags
archguard adds where nvcc runs unwrapped (``-objtemp`` and ``-Xcompiler=-ffile-prefix-map``
for the tree, the Python environment and the toolkit root). The runs alternate, so a
machine's drift falls on both; the ratio is the median with the flags over the median
without, and the objects of the two variants from two tree paths are compared.

Usage: python benchmarks/reproducible_flags.py [--runs 2] [--arch 8.0]  (2 cores: ~6 minutes)
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "speedpkg" / "csrc" / "elementwise.cu"


def compile_once(nvcc: str, tree: Path, arch: str, flags: list[str]) -> tuple[float, bytes]:
    from torch.utils.cpp_extension import include_paths

    sm = arch.replace(".", "")
    argv = [nvcc, "-c", str(tree / SOURCE.name), "-o", str(tree / "out.o")]
    argv += [f"-I{p}" for p in include_paths(device_type="cuda")]
    argv += [f"-I{sysconfig.get_paths()['include']}", "-Xcompiler", "-fPIC", "-O2"]
    argv += ["-DSPEEDPKG_ELEMENTWISE=1", "-std=c++17", f"-gencode=arch=compute_{sm},code=sm_{sm}"]
    argv += flags
    started = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True)
    return time.perf_counter() - started, (tree / "out.o").read_bytes()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--arch", default="8.0")
    args = parser.parse_args()
    sys.path.insert(0, str(HERE.parent / "src"))
    from archguard._integration.reproducible import reproducible

    nvcc = shutil.which("nvcc")
    if nvcc is None:
        sys.exit("no nvcc on PATH")
    toolkit = str(Path(nvcc).resolve().parent.parent)
    times: dict[str, list[float]] = {"plain": [], "reproducible": []}
    objects: dict[str, list[bytes]] = {"plain": [], "reproducible": []}
    with tempfile.TemporaryDirectory() as tmp:
        for run in range(args.runs):
            for variant in ("plain", "reproducible"):
                tree = Path(tmp) / f"{variant}-{run}" / ("deeper/" * run) / "pkg"
                tree.mkdir(parents=True)
                shutil.copy(SOURCE, tree / SOURCE.name)
                flags = list(
                    reproducible(
                        tree,
                        toolkit_root=toolkit,
                        cache_tool="off",
                        environ={"SOURCE_DATE_EPOCH": "0"},
                        cuda_major=13,
                        uses=[],
                    ).nvcc
                )
                took, obj = compile_once(nvcc, tree, args.arch, flags if variant != "plain" else [])
                times[variant].append(took)
                objects[variant].append(obj)
                print(f"run {run + 1} {variant:12s} {took:6.1f} s", flush=True)
    plain, repro = (statistics.median(times[v]) for v in ("plain", "reproducible"))
    print(f"median without the flags {plain:.1f} s, with {repro:.1f} s: ratio {repro / plain:.3f}")
    for variant in ("plain", "reproducible"):
        same = len(set(objects[variant])) == 1
        print(
            f"{variant}: the objects from {args.runs} tree paths are {'' if same else 'NOT '}"
            "the same bytes"
        )
    print(
        "(nvcc names each anonymous namespace after the source's absolute path, and torch's "
        "headers bring one: two paths differ in .nv_fatbin and that namespace's .rodata "
        "whatever the flags; a farm builds each source at one path, named by its content)"
    )


if __name__ == "__main__":
    main()
