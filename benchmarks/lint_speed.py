#!/usr/bin/env python3
"""How long the stub lint takes, measured side by side in one run, for the full cu130 list
(``sm_75 ... sm_120 compute_90 compute_120``, every known device and its own f/a targets):

  (e) the example package (two .cu files, torch headers outside the scan);
  (c) one CUTLASS-based corpus file (tests/lint_corpus/cutlass/mma_sm90_gmma.cu) and the
      TensorRT-LLM grid-dependency guard flashinfer vendors (its CUTLASS macros included);
  (g) grouped_gemm 0.3.0's extension as its build compiles it: csrc/ops.cu and
      csrc/grouped_gemm.cu with its own include directories (third_party/cutlass/include:
      568 vendored CUTLASS headers, and csrc), the released sdist fetched with pip and
      checked against its pinned sha256 (or ``--grouped-gemm DIR``, an unpacked tree);
  (n) NATTEN 0.21.7's Blackwell FNA unit with its own include directories (csrc/include and
      its vendored CUTLASS 4.3.5), NATTEN_WITH_CUTLASS left undecided: every CUTLASS header
      is reached under a "maybe" branch (before the fix it was walked once per include
      path and did not finish in 5 minutes);
  (s) a synthetic stress file: 2,000 `#if __CUDA_ARCH__` regions that only set a constexpr
      value, 2,000 constexpr values computed from `__CUDA_ARCH__`, 30,000 other lines (42,001
      lines): following each value to its uses must cost its uses, not the whole file again.

Each case is linted ``--runs`` times (no budget, as ``archguard lint`` runs); the script
prints the best and median wall time, the files the walk read, and each case's ratio to (e).
The issue's bar: (g) well inside 30 s on 2 cores; the in-build lint has a budget
(ARCHGUARD_LINT_BUDGET, default 10 s per extension) on top.

Usage: python benchmarks/lint_speed.py [--runs 3] [--grouped-gemm DIR] [--natten DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from packaging.version import Version

from archguard.core.arch import parse_targets
from archguard.core.toolkit import bundled_toolkit, known_arches
from archguard.core.torchbuild import bundled_torch
from archguard.lint.guards import Report, Wheel, analyse
from archguard.lint.sources import Sources, include_dirs_of, parse_defines, project_sources

REPO = Path(__file__).resolve().parent.parent
CU130 = "sm_75 sm_80 sm_86 sm_90 sm_100 sm_120 compute_90 compute_120"
SDISTS = {
    "grouped_gemm": ("0.3.0", "f0555da33a975610e9160f52449082c5e699525524581a0e5f990b14b02676a3"),
    "natten": ("0.21.7", "8417236b74db079b2d23899ec8f77514fb2dc73d4bbd6b346a45b6967fc05ffb"),
}


def fetch(name: str, work: Path) -> Path:
    version, sha256 = SDISTS[name]
    dl = work / "dl"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--no-binary",
            ":all:",
            "--no-build-isolation",
            f"{name}=={version}",
            "-d",
            str(dl),
        ],
        check=True,
        capture_output=True,
        # its setup.py asks the GPU for its capability unless the list is set
        env={**os.environ, "TORCH_CUDA_ARCH_LIST": "8.0"},
    )
    (archive,) = dl.glob(f"{name}-{version}.tar.gz")
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    if digest != sha256:
        raise SystemExit(f"{archive} is not the pinned sdist (sha256 {digest})")
    with tarfile.open(archive) as tf:
        tf.extractall(work / "src", filter="data")
    return work / "src" / f"{name}-{version}"


def cases(
    grouped_gemm: Path, natten: Path
) -> dict[str, tuple[list[str], list[Path], list[Path], list[str]]]:
    """name -> (translation units, include dirs, the dirs the walk may enter, -D/-U flags)."""
    example = REPO / "example_package"
    corpus = REPO / "tests" / "lint_corpus"
    gg = grouped_gemm
    return {
        "(e) example_package": (project_sources(example), include_dirs_of(example), [example], []),
        "(c) CUTLASS mma_sm90_gmma.cu": (
            [str(corpus / "cutlass" / "mma_sm90_gmma.cu")],
            [corpus / "cutlass"],
            [corpus / "cutlass"],
            [],
        ),
        "(c) flashinfer grid_dependency_control.cu": (
            [str(corpus / "flashinfer" / "grid_dependency_control.cu")],
            [corpus / "flashinfer"],
            [corpus / "flashinfer"],
            ["-DCUTLASS_ENABLE_GDC_FOR_SM100=1", "-UCUTLASS_ENABLE_GDC_FOR_SM90"],
        ),
        "(g) grouped_gemm 0.3.0": (
            [str(gg / "csrc" / "ops.cu"), str(gg / "csrc" / "grouped_gemm.cu")],
            [gg / "third_party" / "cutlass" / "include", gg / "csrc"],
            [gg],
            ["-std=c++17"],
        ),
        # its own #if NATTEN_WITH_CUTLASS left undecided (no -D): every CUTLASS header is
        # reached under a "maybe" branch, the case that used to be walked once per path
        "(n) NATTEN 0.21.7 blackwell_fna_forward.cu": (
            [str(natten / "csrc" / "src" / "blackwell_fna_forward.cu")],
            [natten / "csrc" / "include", natten / "third_party" / "cutlass" / "include"],
            [natten],
            [],
        ),
    }


def stress_file(work: Path) -> Path:
    parts = [
        f"#if __CUDA_ARCH__ >= 900\nstatic constexpr bool v{i} = true;\n#else\n"
        f"static constexpr bool v{i} = false;\n#endif\n"
        f"static constexpr int a{i} = __CUDA_ARCH__ / 10;\n"
        for i in range(2000)
    ]
    parts += [f"int f{j}(int x) {{ return x + {j}; }}\n" for j in range(30000)]
    parts.append("__global__ void k() { if constexpr (v5) { } }\n")
    path = work / "stress" / "values.cu"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(parts))
    return path


def timed(
    roots: list[str], dirs: list[Path], inside: list[Path], flags: list[str], runs: int
) -> tuple[list[float], Report]:
    wheel = Wheel(
        parse_targets(CU130, "cu130", known=known_arches()),
        bundled_toolkit((13, 0)),
        bundled_torch((13, 0), Version("2.13")).targets,
    )
    times: list[float] = []
    report = None
    for _ in range(runs):
        sources = Sources.on_disk(dirs, inside, parse_defines(flags))
        started = time.perf_counter()
        report = analyse(roots, wheel, sources)
        times.append(time.perf_counter() - started)
    assert report is not None
    return times, report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--grouped-gemm", type=Path, help="an unpacked grouped_gemm 0.3.0 tree")
    parser.add_argument("--natten", type=Path, help="an unpacked natten 0.21.7 tree")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tree = args.grouped_gemm or fetch("grouped_gemm", Path(tmp))
        natten = args.natten or fetch("natten", Path(tmp))
        results: dict[str, tuple[list[float], Report]] = {}
        stress = stress_file(Path(tmp))
        every = {
            **cases(tree, natten),
            "(s) synthetic: 4,000 values in 42,001 lines": (
                [str(stress)],
                [stress.parent],
                [stress.parent],
                [],
            ),
        }
        for name, (roots, dirs, inside, flags) in every.items():
            results[name] = timed(roots, dirs, inside, flags, args.runs)
    base = min(results["(e) example_package"][0])
    print(f"archguard lint, full cu130 list ({CU130}), {args.runs} runs each")
    print(
        f"{'case':44} {'best ms':>9} {'median ms':>10} {'files':>6} {'findings':>9} "
        f"{'undecided':>10} {'x (e)':>8}"
    )
    for name, (times, report) in results.items():
        print(
            f"{name:44} {min(times) * 1000:9.1f} {statistics.median(times) * 1000:10.1f} "
            f"{report.files:6d} {len(report.findings):9d} {len(report.not_understood):10d} "
            f"{min(times) / base:8.1f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
