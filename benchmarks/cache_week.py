#!/usr/bin/env python3
"""A week of daily farm runs on one machine's cache, simulated: what the cache holds each
day, without a budget and with ``ARCHGUARD_CACHE_MAX`` (issue 57).

Each day a farm of 2 cells x 3 packages runs: every day brings a new torch patch for one cell
(a new cell environment, ~5 GB as uv makes it), every third day a new archguard (new
environments for both cells, since an environment is named by archguard's code), each day
new source copies (~20 MB each), build-requirement overlays (~300 MB) and a download. Entries
are made as the farm makes them (the same directories, sparse files of the real sizes, each
entry's last use the day it was used) and the budget is kept by the same function ``farm
run`` calls at its end (:func:`archguard.detect.cachestore.budget_line`). Nothing is built:
the sizes are the ones a real farm's entries have (measured: a cu130 torch 2.13 environment
4.9 GB, an overlay 0.3 GB).

Usage: python benchmarks/cache_week.py [--days 7] [--budget 16G]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))

from archguard.detect.cachestore import budget_line, entries, human, parse_size  # noqa: E402

GB = 1 << 30
ENV, SOURCE, OVERLAY, DOWNLOAD = int(4.9 * GB), 20 << 20, 300 << 20, 5 << 20
CELLS = ("py312-torch2.13", "py312-torch2.14")
PACKAGES = ("alpha", "beta", "gamma")


def _entry(path: Path, size: int, when: float) -> None:
    """A cache entry of ``size`` bytes (a sparse file: instant, counted by its size), last
    used at ``when``."""
    path.mkdir(parents=True, exist_ok=True)
    data = path / "data"
    with data.open("wb") as f:
        f.truncate(size)
    for p in (data, path):
        os.utime(p, (when, when))


def _day(root: Path, day: int, when: float) -> None:
    archguard = day // 3  # a new archguard every third day
    for i, cell in enumerate(CELLS):
        patch = day if i == 0 else day // 2  # one cell's torch moves daily, the other slower
        _entry(root / "envs" / f"{cell}.{patch}-ag{archguard}", ENV, when)
    for name in PACKAGES:
        _entry(root / "src" / f"{name}-{day:04x}", SOURCE, when)
        _entry(root / "build-env" / f"{name}-{day:04x}", OVERLAY, when)
    _entry(root / "downloads" / f"torch-{day}", DOWNLOAD, when)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=7)
    parser.add_argument("--budget", default="16G")
    args = parser.parse_args()
    budget = parse_size(args.budget, "--budget")
    start = time.time() - args.days * 86400
    with tempfile.TemporaryDirectory() as unbounded, tempfile.TemporaryDirectory() as bounded:
        roots = (Path(unbounded), Path(bounded))
        print(f"{'day':>3}  {'no budget':>12}  {f'budget {args.budget}':>14}  last run's summary")
        for day in range(args.days):
            when = start + day * 86400
            for root in roots:
                _day(root, day, when)
            before = sum(e.size for e in entries(roots[1]))
            line = budget_line(roots[1], budget)
            free = sum(e.size for e in entries(roots[0]))
            kept = sum(e.size for e in entries(roots[1]))
            print(
                f"{day + 1:>3}  {human(free):>12}  {human(before):>6} -> {human(kept):<8}  {line}"
            )
        assert kept <= budget, (kept, budget)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
