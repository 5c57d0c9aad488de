#!/usr/bin/env python3
"""archguard's own checks on real released sdists (issue 35): the same build with the checks
on (archguard's defaults: the stub lint before compiling, the read-back of every binary with
cuobjdump after ``build_ext``, the per-kernel disassembly where a stub is possible) and off
(``ARCHGUARD_LINT=off ARCHGUARD_VERIFY=off ARCHGUARD_STUBS=0``), side by side in one run.

Each build is ``pip wheel --no-build-isolation`` of a fresh copy of the sdist's tree at the
same path (so nothing of one build is reused by the next), archguard active, the list fixed
by ``--list``. The order alternates per sdist (off, on, on, off with ``--runs 2``) so that a
warming disk or a throttling core does not favour one side. Prints each wall time, the
ratio on/off per sdist, and the checks' own time as the build's log states it (the lint's
"(X s)" per extension, the read-back's and the disassembly's "in X s"). The wall ratio holds
nvcc's run-to-run spread (the same commands vary by up to 10 % here), so each line of the
build's output is timed as it comes, and the time outside the compile (setuptools' first
"building" line to archguard's first line after ``build_ext``) is compared too: every check
runs there, side by side with the same stretch of the build without them.

Usage: python benchmarks/check_overhead.py [SDIST ...] [--list "8.0;9.0+PTX"] [--runs 2]
SDIST: a file, URL#sha256=HEX, or name==version (default: three released sdists).
(on 2 cores, the defaults: about 25 minutes)
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from build_speed import base_env

from archguard.detect.fetch import source_tree

DEFAULT = ("cugpt==0.1.0", "torch_ms_deform_attn==0.1.1", "fused_lncc==0.1.0")
OFF = {"ARCHGUARD_LINT": "off", "ARCHGUARD_VERIFY": "off", "ARCHGUARD_STUBS": "0"}


_BUILDING = re.compile(r"^\s*building '")  # setuptools, as each extension's compile starts
_AFTER = re.compile(r"archguard: (?:verify|stubs|abi|compiler cache)")  # after build_ext


def build(pristine: Path, work: Path, env: dict[str, str]) -> tuple[float, float, str]:
    """One build: (wall s, the compile's s, its log). The compile runs from setuptools'
    first "building '...' extension" line to the last line before archguard's first line
    after ``build_ext`` (each line timed as it comes)."""
    tree = work / pristine.name
    if tree.exists():
        shutil.rmtree(tree)
    shutil.copytree(pristine, tree)
    out = work / "wheels"
    shutil.rmtree(out, ignore_errors=True)
    argv = [sys.executable, "-m", "pip", "wheel", "-v", "--no-build-isolation", "--no-deps"]
    lines: list[tuple[float, str]] = []
    start = time.perf_counter()
    with subprocess.Popen(
        [*argv, "-w", str(out), str(tree)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        env=env,
    ) as proc:
        assert proc.stdout is not None
        lines.extend((time.perf_counter() - start, line) for line in proc.stdout)
        code = proc.wait()
    wall = time.perf_counter() - start
    log = "".join(line for _, line in lines)
    if code != 0 or not list(out.glob("*.whl")):
        tail = "\n".join(log.strip().splitlines()[-8:])
        raise SystemExit(f"{pristine.name}: the build failed:\n{tail}")
    return wall, compile_seconds(lines), log


def compile_seconds(lines: list[tuple[float, str]]) -> float:
    began = next((t for t, line in lines if _BUILDING.match(line)), None)
    if began is None:
        return 0.0
    last = began
    for t, line in lines:
        if t >= began and _AFTER.search(line):
            return last - began
        last = t
    return last - began


_OWN = re.compile(
    r"archguard: (?:lint: extension .*\((?P<lint>[\d.]+) s\)$"
    r"|verify: .* read back .*in (?P<read>[\d.]+) s with )"
)


def checks_seconds(log: str) -> float:
    """The checks' own time, summed from the build log's lines."""
    total = 0.0
    for line in log.splitlines():
        match = _OWN.search(line.strip())
        if match:
            total += float(match["lint"] or match["read"])
    return total


def _totals(
    results: list[tuple[str, list[float], list[float], float]],
) -> tuple[list[float], list[float], float]:
    """Each run's sum over the sdists (run k of every sdist), and the summed own time."""
    on = [sum(r[1][k] for r in results) for k in range(len(results[0][1]))]
    off = [sum(r[2][k] for r in results) for k in range(len(results[0][2]))]
    return on, off, sum(r[3] for r in results)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sdists", nargs="*", default=list(DEFAULT), metavar="SDIST")
    parser.add_argument("--list", default="8.0;9.0+PTX", help="the build's arch list")
    parser.add_argument("--runs", type=int, default=2, help="pairs per sdist")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="archguard-checks-bench-"))
    env = base_env()
    env.update(
        {
            "ARCHGUARD_ENABLE": "1",
            "ARCHGUARD_ARCH_LIST": args.list,
            "FORCE_CUDA": "1",  # the packages' own switch where they have one
            # no compile cache: the same tree at the same path would hit the second time
            "ARCHGUARD_COMPILER_CACHE": "off",
            "TORCH_NO_COMPILER_WRAPPER": "1",
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        }
    )
    print(f"list {args.list}, {os.cpu_count()} cores, {args.runs} pair(s) per sdist", flush=True)
    results: list[tuple[str, list[float], list[float], float]] = []
    beside: list[tuple[str, float, list[float]]] = []  # (sdist, on - off outside the compile)
    try:
        for spec in args.sdists:
            pristine = source_tree(spec)
            on: list[float] = []
            off: list[float] = []
            own: list[float] = []
            outside_on: list[float] = []  # each build's time outside its compile
            outside_off: list[float] = []
            for run in range(args.runs):
                order = ("off", "on") if run % 2 == 0 else ("on", "off")
                for side in order:
                    wall, compiling, log = build(
                        pristine, work, {**env, **OFF} if side == "off" else env
                    )
                    (off if side == "off" else on).append(wall)
                    (outside_off if side == "off" else outside_on).append(wall - compiling)
                    note = ""
                    if side == "on":
                        own.append(checks_seconds(log))
                        note = f"  (the checks' own time, from the log: {own[-1]:.1f} s)"
                    print(
                        f"  {spec} checks {side}: {wall:.1f} s, {wall - compiling:.1f} s of it "
                        f"outside the compile{note}",
                        flush=True,
                    )
            results.append((spec, on, off, statistics.median(own)))
            beside.append(
                (spec, statistics.median(outside_on) - statistics.median(outside_off), off)
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(
        "\nchecks on / off, measured side by side in this run (median; and the fastest of "
        "each side, the run least disturbed by the machine):"
    )
    for spec, on, off, own_s in [*results, ("all", *_totals(results))]:
        on_s, off_s = statistics.median(on), statistics.median(off)
        print(
            f"  {spec:30s} on {on_s:6.1f} s  off {off_s:6.1f} s  {on_s / off_s:5.3f} x  "
            f"(fastest {min(on) / min(off):5.3f} x)   checks' own {own_s:4.1f} s = "
            f"{own_s / on_s:5.1%} of the build"
        )
    print(
        "\nthe same, without the compile's own spread (nvcc's identical commands vary by up to "
        "10 % from run to run here): (off + the difference in time outside the compile) / off"
    )
    for spec, delta, off in beside:
        off_s = statistics.median(off)
        print(
            f"  {spec:30s} {delta:+5.1f} s outside the compile   {(off_s + delta) / off_s:5.3f} x"
        )
    total_off = sum(statistics.median(off) for _, _, off in beside)
    total_delta = sum(delta for _, delta, _ in beside)
    print(
        f"  {'all':30s} {total_delta:+5.1f} s outside the compile   "
        f"{(total_off + total_delta) / total_off:5.3f} x"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
