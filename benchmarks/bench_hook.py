#!/usr/bin/env python3
"""What archguard's always-on setuptools hook costs every build in the environment.

Measures ``setuptools.Distribution(...)`` construction (which runs every
``finalize_distribution_options`` hook) side by side in one process, alternating:
  A  archguard's hook active, in an unrelated project (no [tool.archguard]);
  B  archguard's hook filtered out (as if not installed);
  C  archguard's hook active, in a project that opted in (parses pyproject.toml, wraps).
Prints the median per construction and the ratios A/B and C/B, pair by pair.

Usage: python benchmarks/bench_hook.py [--rounds 15] [--per-round 300]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from setuptools import Distribution


def construct(n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        Distribution({"name": "x", "version": "1"})
    return (time.perf_counter() - start) / n


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--per-round", type=int, default=300)
    args = parser.parse_args()
    original_removed = Distribution._removed

    def without_archguard(ep: object) -> bool:
        return getattr(ep, "name", "") == "archguard" or original_removed(ep)

    with tempfile.TemporaryDirectory() as tmp:
        unrelated = Path(tmp, "unrelated")
        opted = Path(tmp, "opted")
        for d in (unrelated, opted):
            d.mkdir()
        (unrelated / "pyproject.toml").write_text('[project]\nname = "x"\nversion = "1"\n')
        (opted / "pyproject.toml").write_text(
            '[build-system]\nrequires = ["setuptools", "torch-archguard"]\n'
            '[tool.archguard]\narch_list = "8.0;9.0+PTX"\n'
        )
        a, b, c = [], [], []
        construct(50)  # warm-up
        for _ in range(args.rounds):
            os.chdir(unrelated)
            Distribution._removed = staticmethod(original_removed)  # type: ignore[method-assign]
            a.append(construct(args.per_round))
            Distribution._removed = staticmethod(without_archguard)  # type: ignore[method-assign]
            b.append(construct(args.per_round))
            Distribution._removed = staticmethod(original_removed)  # type: ignore[method-assign]
            os.chdir(opted)
            c.append(construct(args.per_round))
        # the hook call alone, for each kind of project
        from archguard._integration.setuptools_hook import finalize_distribution_options

        class Dummy:
            src_root: str | None = None

            def get_command_class(self, command: str) -> type:
                return object

        def hook_cost(where: Path, n: int = 5000) -> float:
            Dummy.src_root = str(where)
            start = time.perf_counter()
            for _ in range(n):
                finalize_distribution_options(Dummy())
            return (time.perf_counter() - start) / n

        (Path(tmp, "none")).mkdir()
        alone = {
            "no pyproject.toml": hook_cost(Path(tmp, "none")),
            "unrelated pyproject.toml": hook_cost(unrelated),
            "opted-in (parse + wrap)": hook_cost(opted, 500),
        }
        os.chdir("/")

    def us(x: list[float]) -> str:
        return f"{statistics.median(x) * 1e6:8.1f} us"

    print(f"Distribution() construction, median of {args.rounds} rounds x {args.per_round}")
    print(f"  A hook active, unrelated project   {us(a)}")
    print(f"  B hook not installed               {us(b)}")
    print(f"  C hook active, opted-in project    {us(c)}")
    ab = [x / y for x, y in zip(a, b, strict=True)]
    cb = [x / y for x, y in zip(c, b, strict=True)]
    print(
        f"  ratio A/B  median {statistics.median(ab):.3f}  (min {min(ab):.3f}, max {max(ab):.3f})"
    )
    print(
        f"  ratio C/B  median {statistics.median(cb):.3f}  (min {min(cb):.3f}, max {max(cb):.3f})"
    )
    print("the hook call alone:")
    for label, seconds in alone.items():
        share = seconds / statistics.median(b)
        print(f"  {label:<26} {seconds * 1e6:8.1f} us  ({share:.2%} of a Distribution())")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
