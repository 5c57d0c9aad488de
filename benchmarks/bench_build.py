#!/usr/bin/env python3
"""What archguard costs a real CUDA-extension build, side by side with plain torch.

Builds tests/packages/minicuda (a small kernel, no torch headers) into a wheel, alternating:
  A  archguard active (resolution, nvcc probe, flag injection, record);
  B  ARCHGUARD_DISABLE=1 and TORCH_CUDA_ARCH_LIST set by hand to the same list,
both with the same nvcc and torch, so both binaries hold the same targets. Prints the wall
time of each build and the ratio A/B pair by pair.

Usage: python benchmarks/bench_build.py [--pairs 3]   (needs nvcc and a CUDA torch)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SETUP = """\
from setuptools import Extension, setup
from torch.utils.cpp_extension import BuildExtension
setup(name="minicuda", version="1.0",
      ext_modules=[Extension("_minicuda", ["mod.c", "kernel.cu"],
                             extra_compile_args={"cxx": [], "nvcc": ["-O2"]})],
      cmdclass={"build_ext": BuildExtension})
"""
PYPROJECT = """\
[build-system]
requires = ["setuptools>=64", "torch", "torch-archguard"]
build-backend = "setuptools.build_meta"
"""


def build(src: Path, out: Path, env: dict[str, str]) -> float:
    shutil.rmtree(src / "build", ignore_errors=True)
    shutil.rmtree(out, ignore_errors=True)
    start = time.perf_counter()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            str(src),
            "-w",
            str(out),
        ],
        env=env,
        check=True,
        capture_output=True,
    )
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=3)
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARCHGUARD_")}
    env.setdefault("CUDA_HOME", "/usr/local/cuda")
    env["CUDA_VISIBLE_DEVICES"] = ""
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp, "minicuda")
        src.mkdir()
        for name in ("kernel.cu", "mod.c"):
            shutil.copy(REPO / "tests" / "packages" / "minicuda" / name, src)
        (src / "setup.py").write_text(SETUP)
        (src / "pyproject.toml").write_text(PYPROJECT)
        listing = json.loads(
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "archguard",
                    "list",
                    "--project",
                    str(src),
                    "--format",
                    "json",
                ],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            ).stdout
        )
        plain_env = {
            **env,
            "ARCHGUARD_DISABLE": "1",
            "TORCH_CUDA_ARCH_LIST": listing["torch_arch_list"],
        }
        build(src, Path(tmp, "warm"), env)  # warm-up: page cache, pip
        a, b = [], []
        for i in range(args.pairs):
            a.append(build(src, Path(tmp, f"a{i}"), env))
            b.append(build(src, Path(tmp, f"b{i}"), plain_env))
    print(f"minicuda wheel build, list {listing['effective']}, {args.pairs} pairs")
    print(
        "  A archguard   "
        + " ".join(f"{x:6.2f}s" for x in a)
        + f"   median {statistics.median(a):.2f}s"
    )
    print(
        "  B plain torch "
        + " ".join(f"{x:6.2f}s" for x in b)
        + f"   median {statistics.median(b):.2f}s"
    )
    ratios = [x / y for x, y in zip(a, b, strict=True)]
    print(
        f"  ratio A/B median {statistics.median(ratios):.3f} "
        f"(min {min(ratios):.3f}, max {max(ratios):.3f})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
