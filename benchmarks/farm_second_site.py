#!/usr/bin/env python3
"""The same farm built again from a second checkout into a second site (issue 50), measured
in one run: released sdists x one cell, sccache on (a cache directory of its own, empty at
the start), archguard's cache shared as on one builder:

  (1) the manifest in checkout A, built into site A: sccache cold;
  (2) a copy of the manifest in checkout B (another path, a second later), into site B.

The cell's environment is named by its content under archguard's cache and each tree is
built from its content-addressed copy there, so every path a compile sees is the same in
(2) as in (1). Prints per job the build time of each run and their ratio (goal <= 0.35),
the hits sccache counted in (2) (each job's log says them), and whether (2)'s wheel is
byte for byte (1)'s; for one that is not, the zip members and ELF sections that differ.

With ``--cache off`` both runs compile everything (no compile cache): whether the same
inputs give the same bytes when every object is compiled again, from another checkout into
another site, a second later.

Usage: python benchmarks/farm_second_site.py [--arch 8.0] [--sccache PATH] [--cache off]
           [--sdists ...]
(2 cores, the default five sdists: about 10 minutes; with --cache off about 13)
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from farm_common import SDISTS, base_env, farm_run, manifest, prewarm


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arch", default="8.0")
    parser.add_argument("--sdists", nargs="+", default=list(SDISTS))
    parser.add_argument("--sccache", default=os.environ.get("AG_TEST_SCCACHE") or "sccache")
    parser.add_argument("--cache", choices=("sccache", "off"), default="sccache")
    args = parser.parse_args()
    sccache = shutil.which(args.sccache) if args.cache == "sccache" else "off"
    if sccache is None:
        sys.exit(f"no sccache at {args.sccache}")
    work = Path(tempfile.mkdtemp(prefix="archguard-second-site-"))
    first = manifest(work / "a", args.sdists, args.arch)
    second = work / "b" / "deeper" / "farm.toml"
    second.parent.mkdir(parents=True)
    shutil.copy(first, second)
    cache = work / "cache"
    prewarm(first, cache)
    env = base_env(
        ARCHGUARD_COMPILER_CACHE=args.cache,
        ARCHGUARD_CACHE_DIR=str(cache),
        SCCACHE_DIR=str(work / "sccache"),
    )
    if args.cache == "sccache":
        env["PATH"] = f"{Path(sccache).parent}{os.pathsep}{env['PATH']}"
    runs = []
    for label, farm in (("A", first), ("B", second)):
        run = farm_run(farm, work / f"site-{label}", env)
        print(f"({label}) exit {run.returncode}, wall {run.wall:.0f} s")
        print(run.summary.rstrip())
        runs.append(run)
        time.sleep(1.5)  # another time: SOURCE_DATE_EPOCH, not the clock, dates the zip
    from archguard.binaries.compare import wheel_differences
    from archguard.farm.ledger import all_ledgers

    one, two = (runs[0].job_seconds(), runs[1].job_seconds())
    records = [all_ledgers(work / f"site-{label}") for label in ("A", "B")]
    print("\njob | A s | B s | B / A | sccache in B | bytes")
    total = [0.0, 0.0]
    identical = 0
    for job, record in sorted(records[0].items()):
        package = record.package
        other = records[1].get(job)
        log = (
            (work / "site-B" / record.cell / "logs" / f"{package}.log").read_text(errors="replace")
            if (work / "site-B" / record.cell / "logs" / f"{package}.log").is_file()
            else ""
        )
        hits = re.findall(r"compiler cache: sccache for this build: (.*)", log) or [args.cache]
        same = "n/a"
        if other is not None and record.wheels and other.wheels:
            a = record.pooled(work / "site-A")[0]
            b = other.pooled(work / "site-B")[0]
            differs = wheel_differences(a, b)
            same = "identical" if not differs else "; ".join(differs)[:300]
            identical += not differs
        if package in one and package in two:
            total[0] += one[package]
            total[1] += two[package]
            ratio = f"{two[package] / one[package]:.2f}"
        else:
            ratio = "n/a"
        print(
            f"{package} | {one.get(package, 'n/a')} | {two.get(package, 'n/a')} | {ratio} | "
            f"{'; '.join(hits) or 'not said'} | {same}"
        )
    if total[0]:
        print(f"\nall jobs: B / A = {total[1] / total[0]:.3f} (goal <= 0.35)")
    print(f"bit-identical wheels: {identical} of {len(records[0])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
