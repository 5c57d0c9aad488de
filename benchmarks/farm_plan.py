#!/usr/bin/env python3
"""How long `archguard farm plan` takes for a farm of 40 packages x 20 cells (800 jobs), the
issue's scale, in one run: reading the manifest, resolving every job from the bundled tables
and rendering each format. Printed, never asserted (issue 32 asks for under a second).

Usage: python benchmarks/farm_plan.py [--packages 40] [--cells 20] [--repeat 5]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from archguard.farm.manifest import load_manifest
from archguard.farm.plan import plan, render

TORCHES = ("2.13.0", "2.14.1")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--packages", type=int, default=40)
    parser.add_argument("--cells", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    cells = "".join(
        f'[[cell]]\nname = "c{i}"\npython = "3.{10 + i % 4}"\n'
        f'torch = "torch=={TORCHES[i % 2]}"\ncuda = "13.0"\n'
        for i in range(args.cells)
    )
    packages = "".join(
        f'[[package]]\nname = "p{i}"\nsource = "src/p{i}"\n'
        + (f'config = {{ arch_list = "8.0;9.0+PTX;{i % 3 + 10}.0" }}\n' if i % 2 else "")
        for i in range(args.packages)
    )
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "farm.toml")
        path.write_text(cells + packages)
        times = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            jobs = plan(load_manifest(path))
            for fmt in ("text", "json", "github"):
                render(jobs, fmt)  # type: ignore[arg-type]
            times.append(time.perf_counter() - start)
    print(
        f"farm plan: {len(jobs)} jobs ({args.packages} packages x {args.cells} cells), "
        f"manifest read, every job resolved and rendered three ways: best {min(times):.3f} s, "
        f"median {sorted(times)[len(times) // 2]:.3f} s of {args.repeat}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
