#!/usr/bin/env python3
"""Parallelism by build mode (issue #24), measured side by side in one run, pair by pair:

  serial  a package whose BuildExtension has use_ninja=False: three .cu files of 4 device
          compiles each (setuptools compiles one source after another);
  two     a package with two extensions (3 and 1 .cu files) under ninja.

For each shape: (a) archguard's choice, (b) NVCC_THREADS=1 forced (the choice before per-
mode decisions, for the serial shape), (c) torch's defaults (archguard off, the same list
in TORCH_CUDA_ARCH_LIST). The kernels have no torch headers but real device work (templated
loops instantiated many times), so that device compiles dominate as they do in real packages.
Prints each wall time, the ratios a/b and a/c per pair, and the median.

Usage: python benchmarks/build_modes.py [--runs 2]   (on 2 cores: about 10 minutes)
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LIST = "7.5;8.0;8.6;9.0"  # 4 device compiles per .cu
KERNEL = """\
template <int N>
__device__ float work_{n}(float v) {{
  float acc = v;
#pragma unroll
  for (int i = 0; i < N; ++i) acc = acc * 1.0001f + __sinf(acc + i) * __cosf(acc - i);
  return acc;
}}
{instances}
void launch_{n}(float* x, int n) {{ k_{n}_0<<<(n + 127) / 128, 128>>>(x, n); }}
"""
INSTANCE = """\
__global__ void k_{n}_{i}(float* x, int n) {{
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t < n) x[t] = work_{n}<{unroll}>(x[t]);
}}
"""
MODULE = """\
#include <Python.h>
static struct PyModuleDef m = {{PyModuleDef_HEAD_INIT, "{name}", NULL, -1, NULL}};
PyMODINIT_FUNC PyInit_{name}(void) {{ return PyModule_Create(&m); }}
"""


def package(root: Path, extensions: dict[str, int], use_ninja: bool) -> Path:
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    exts, n = [], 0
    for name, files in extensions.items():
        (root / f"{name}.c").write_text(MODULE.format(name=name))
        sources = [f"{name}.c"]
        for _ in range(files):
            n += 1
            instances = "".join(INSTANCE.format(n=n, i=i, unroll=192 + 16 * i) for i in range(32))
            (root / f"k{n}.cu").write_text(KERNEL.format(n=n, instances=instances))
            sources.append(f"k{n}.cu")
        exts.append(
            f'Extension("{name}", {sources!r}, extra_compile_args={{"cxx": [], "nvcc": []}})'
        )
    cmd = "BuildExtension" if use_ninja else "BuildExtension.with_options(use_ninja=False)"
    (root / "setup.py").write_text(
        "from setuptools import Extension, setup\n"
        "from torch.utils.cpp_extension import BuildExtension\n"
        f'setup(name="modes", version="1.0", ext_modules=[{", ".join(exts)}], '
        f'cmdclass={{"build_ext": {cmd}}})\n'
    )
    return root


def build(root: Path, env: dict[str, str]) -> tuple[float, str]:
    shutil.rmtree(root / "build", ignore_errors=True)
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "setup.py", "build_ext", "--inplace"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        sys.stderr.write((proc.stdout + proc.stderr)[-4000:])
        raise SystemExit("build failed")
    return wall, proc.stdout + proc.stderr


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()
    base = {k: v for k, v in os.environ.items() if not k.startswith("ARCHGUARD_")}
    for name in ("MAX_JOBS", "NVCC_THREADS", "TORCH_CUDA_ARCH_LIST"):
        base.pop(name, None)
    base.setdefault("CUDA_HOME", "/usr/local/cuda")
    base["CUDA_VISIBLE_DEVICES"] = ""
    on = {**base, "ARCHGUARD_ENABLE": "1", "ARCHGUARD_ARCH_LIST": LIST}
    configs = {
        "a archguard": on,
        "b NVCC_THREADS=1": {**on, "NVCC_THREADS": "1"},
        "c torch defaults": {**base, "ARCHGUARD_DISABLE": "1", "TORCH_CUDA_ARCH_LIST": LIST},
    }
    work = Path(tempfile.mkdtemp(prefix="archguard-modes-"))
    shapes = {
        "serial (use_ninja=False, 3 .cu x 4 device compiles)": package(
            work / "serial", {"_serial": 3}, use_ninja=False
        ),
        "two extensions (3 + 1 .cu, ninja)": package(
            work / "two", {"_three": 3, "_one": 1}, use_ninja=True
        ),
    }
    print(f"{os.cpu_count()} cores, list {LIST}, {args.runs} paired runs", flush=True)
    try:
        for shape, root in shapes.items():
            times: dict[str, list[float]] = {k: [] for k in configs}
            for run in range(args.runs):
                order = list(configs)[run % len(configs) :] + list(configs)[: run % len(configs)]
                for key in order:
                    wall, log = build(root, configs[key])
                    times[key].append(wall)
                    chosen = [x for x in log.splitlines() if x.startswith("archguard: parallel")]
                    note = (
                        f"  [{chosen[0][len('archguard: parallel: ') :][:110]}]" if chosen else ""
                    )
                    print(f"  {shape[:14]} run {run + 1} {key}: {wall:.1f} s{note}", flush=True)
            print(f"\n{shape}:")
            for key, values in times.items():
                print(f"  {key:18s} median {statistics.median(values):6.1f} s  {values}")
            for other in ("b NVCC_THREADS=1", "c torch defaults"):
                ratios = [a / b for a, b in zip(times["a archguard"], times[other], strict=True)]
                pairs = [round(r, 2) for r in ratios]
                print(f"  a / {other[2:]:16s} {statistics.median(ratios):.2f} (pairs {pairs})")
            print(flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
