#!/usr/bin/env python3
"""A farm keeps every core busy (issue 51), measured side by side in one run: the same farm
of released sdists x one cell, ``farm run --jobs 2``, built twice from scratch (no compile
cache, a cache directory of its own each, so neither reuses the other's work):

  (s) today's static shares: ``ARCHGUARD_JOBSERVER=0``, each build ``MAX_JOBS`` = cores / 2;
  (a) the jobserver with no job started ahead (``--ahead 0``: the run before issue 57's
      last step, whose last job ran alone);
  (j) the jobserver: a token per core; ninja 1.13 takes its compiles from it, archguard's
      nvcc launcher runs each compile's device passes on tokens as they come free, and one
      job more than ``--jobs`` is started ahead (the default; issue 57);
  (w) the jobserver, the launcher running nvcc whole (``ARCHGUARD_NVCC_STEPS=0``: the
      tokens free as a compile starts, as ``--threads``; issue 51's behaviour).

``--trees 3`` builds three small tree packages like the example (one ``.cu`` with torch's
headers each) instead of the sdists, the farm issue 57 measured at 0.77.

Both order their jobs longest first by the size of each source's CUDA code (each site is new:
no recorded durations). The cell's environment is made once before either run (its making is
not compile work), and both runs share archguard's cache for the fetched sdists and build
overlays. Prints each run's wall time, the builds' CPU-seconds, utilization = CPU / (wall x
cores) and the distance from the limit max(CPU / cores, the longest job), from the run's own
summary line, and the ratio of the wall times.

Usage: python benchmarks/farm_jobserver.py [--arch 8.0] [--sdists A==1 B==2 ... | --trees 3]
(2 cores, the default three sdists: about 15 minutes)
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from farm_common import SDISTS, base_env, farm_run, manifest, prewarm, tree_packages

DEFAULT = list(SDISTS)[:3]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arch", default="8.0")
    parser.add_argument("--sdists", nargs="+", default=DEFAULT)
    parser.add_argument("--jobs", default="2")
    parser.add_argument(
        "--more-jobs",
        default="0",
        help="another run: the jobserver with --jobs N (0: none)",
    )
    parser.add_argument("--trees", type=int, default=0, help="small tree packages, not sdists")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="archguard-farm-jobserver-"))
    sources = tree_packages(work, args.trees) if args.trees else args.sdists
    farm = manifest(work, sources, args.arch)
    print(f"farm: {', '.join(sources)} at {args.arch}, --jobs {args.jobs}; work in {work}")
    cache = work / "cache"
    prewarm(farm, cache)
    runs = {}
    configs = [
        ("static", "0", args.jobs, "1", []),
        ("jobserver --ahead 0", "1", args.jobs, "1", ["--ahead", "0"]),
        ("jobserver", "1", args.jobs, "1", []),
        ("jobserver, nvcc whole", "1", args.jobs, "0", []),
    ]
    if args.more_jobs != "0":
        configs.append((f"jobserver --jobs {args.more_jobs}", "1", args.more_jobs, "1", []))
    for label, switch, jobs, steps, extra in configs:
        env = base_env(
            ARCHGUARD_JOBSERVER=switch,
            ARCHGUARD_NVCC_STEPS=steps,
            ARCHGUARD_COMPILER_CACHE="off",
            ARCHGUARD_CACHE_DIR=str(cache),
        )
        site = work / f"site-{label.replace(' ', '').replace('--', '-').replace(',', '')}"
        run = farm_run(farm, site, env, "--jobs", jobs, *extra)
        runs[label] = run
        print(f"\n({label}) exit {run.returncode}, wall {run.wall:.0f} s")
        print(run.summary.rstrip())
        if run.returncode != 0:
            print(run.log[-3000:])
    static = runs["static"]
    print()
    for label, run in runs.items():
        if label == "static":
            continue
        print(
            f"wall: {label} / static = {run.wall / static.wall:.3f}; utilization "
            f"{static.utilization} -> {run.utilization} (goal >= 0.9); distance from the limit "
            f"{static.distance}x -> {run.distance}x (goal <= 1.1x)"
        )
    return 0 if all(r.returncode == 0 for r in runs.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
