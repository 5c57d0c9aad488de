#!/usr/bin/env python3
"""Long fuzz run over every parser target in tests/fuzz_targets.py.

Usage: python scripts/fuzz.py [--minutes M] [--only NAME ...] [--jobs N]

Each target runs for M minutes (default 10) in rounds of hypothesis examples with fresh
seeds, counting every input tried. A failure prints hypothesis' minimal failing example and
counts as found. The summary lists inputs tried and failures per target; exit status 1 if
any target failed.
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))


def run_target(args: tuple[str, float]) -> tuple[str, int, int, float, list[str]]:
    name, minutes = args
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from fuzz_targets import TARGETS

    target, strategy = TARGETS[name]
    count = 0
    failures: list[str] = []
    deadline = time.monotonic() + minutes * 60
    start = time.monotonic()

    @settings(
        max_examples=2000,
        deadline=None,
        database=None,
        derandomize=False,
        suppress_health_check=list(HealthCheck),
    )
    @given(data=st.data())
    def round_(data: st.DataObject) -> None:
        nonlocal count
        count += 1
        target(*data.draw(strategy))

    while time.monotonic() < deadline:
        try:
            round_()
        except Exception:  # a real failure: hypothesis re-raised the minimal example
            failures.append(traceback.format_exc(limit=3))
            if len(failures) >= 3:
                break
    return name, count, len(failures), time.monotonic() - start, failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--only", nargs="*")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args(argv)
    from fuzz_targets import TARGETS

    names = args.only or sorted(TARGETS)
    with multiprocessing.Pool(args.jobs) as pool:
        results = pool.map(run_target, [(n, args.minutes) for n in names])
    print(f"{'target':<16} {'inputs':>10} {'failures':>9} {'seconds':>8}")
    bad = 0
    for name, count, failed, seconds, failures in results:
        print(f"{name:<16} {count:>10} {failed:>9} {seconds:>8.0f}")
        bad += failed
        for f in failures:
            print(f"--- {name} failure ---\n{f}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
