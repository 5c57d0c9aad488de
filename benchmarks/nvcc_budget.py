#!/usr/bin/env python3
"""A jobserver-like budget for nvcc's ``--threads`` (issue 35, the tail of issue 24), tried
and measured side by side in one run.

The shape: one extension of three ``.cu`` files (four device compiles each) under ninja on C
cores. archguard's rule gives 2 jobs x 1 thread on 2 cores: the first two files compile side
by side, and the third, started when one of them ends, runs alone with one thread while the
other core idles. The budget tried here: a wrapper (``PYTORCH_NVCC``) that counts the compiles
as they start and gives the k-th of S files ``C / min(jobs, S - k + 1)`` threads: the files
still to come share the cores, so the last one takes every core (briefly oversubscribed while
the one before it ends).

  (a) archguard's static choice (``ARCHGUARD_JOBSERVER=0``: MAX_JOBS and --threads fixed);
  (b) the static choice, each nvcc call's --threads set by the budget wrapper;
  (c) archguard's default: the jobserver (a token per core), ninja 1.13 taking a token per
      compile, archguard's nvcc launcher running nvcc's steps itself (issue 57), each device
      pass on a token as one comes free (the tail takes the cores the others leave, as they
      leave them);
  (d) the same, the launcher running nvcc whole (``ARCHGUARD_NVCC_STEPS=0``, the default of
      issue 51): --threads of its token plus the tokens free as the compile starts.

Usage: python benchmarks/nvcc_budget.py [--runs 2] [--files 3] [--configs a,b,c,d]
(2 cores: about 4 minutes a configuration a run)
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from build_modes import LIST, build, package

WRAPPER = """\
#!{python}
import fcntl, os, sys
state, nvcc = {state!r}, {nvcc!r}
sources, jobs, cores = {sources}, {jobs}, {cores}
with open(state, "a+") as f:
    fcntl.flock(f, fcntl.LOCK_EX)
    f.seek(0)
    k = len(f.read().splitlines()) + 1
    f.write("started\\n")
args, skip = [], False
for a in sys.argv[1:]:
    if skip:
        skip = False
        continue
    if a in ("--threads", "-t"):
        skip = True
        continue
    if a.startswith("--threads="):
        continue
    args.append(a)
threads = max(1, cores // max(1, min(jobs, sources - k + 1)))
with open(state + ".log", "a") as log:
    log.write(f"compile {{k}}: --threads {{threads}}\\n")
os.execv(nvcc, [nvcc, *args, "--threads", str(threads)])
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--files", type=int, default=3)
    parser.add_argument("--configs", default="a,b,c,d", help="which, by letter")
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    base = {k: v for k, v in os.environ.items() if not k.startswith("ARCHGUARD_")}
    for name in ("MAX_JOBS", "NVCC_THREADS", "TORCH_CUDA_ARCH_LIST", "PYTORCH_NVCC"):
        base.pop(name, None)
    base.setdefault("CUDA_HOME", "/usr/local/cuda")
    base["CUDA_VISIBLE_DEVICES"] = ""
    on = {**base, "ARCHGUARD_ENABLE": "1", "ARCHGUARD_ARCH_LIST": LIST}
    work = Path(tempfile.mkdtemp(prefix="archguard-budget-"))
    root = package(work / "pkg", {"_three": args.files}, use_ninja=True)
    state = work / "budget-state"
    wrapper = work / "nvcc-budget"
    nvcc = str(Path(base["CUDA_HOME"], "bin", "nvcc"))
    jobs = min(args.files, cores)
    wrapper.write_text(
        WRAPPER.format(
            python=sys.executable,
            state=str(state),
            nvcc=nvcc,
            sources=args.files,
            jobs=jobs,
            cores=cores,
        )
    )
    wrapper.chmod(0o755)
    static = {**on, "ARCHGUARD_JOBSERVER": "0"}
    configs = {
        "a static": static,
        "b budget": {**static, "PYTORCH_NVCC": str(wrapper)},
        "c jobserver": on,
        "d whole": {**on, "ARCHGUARD_NVCC_STEPS": "0"},
    }
    wanted = set(args.configs.split(","))
    configs = {k: v for k, v in configs.items() if k[0] in wanted}
    times: dict[str, list[float]] = {k: [] for k in configs}
    print(f"{cores} cores, {args.files} .cu x 4 device compiles, {args.runs} paired runs")
    try:
        for run in range(args.runs):
            order = list(configs) if run % 2 == 0 else list(reversed(configs))
            for key in order:
                state.unlink(missing_ok=True)
                Path(f"{state}.log").unlink(missing_ok=True)
                wall, log = build(root, configs[key])
                times[key].append(wall)
                chosen = [x for x in log.splitlines() if x.startswith("archguard: parallel")]
                given = Path(f"{state}.log")
                note = given.read_text().replace("\n", "; ") if given.is_file() else ""
                print(f"  run {run + 1} {key}: {wall:.1f} s  {note}", flush=True)
                if chosen and run == 0:
                    for line in chosen[:3]:
                        print(f"      {line[:160]}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("\nmeasured side by side in this run:")
    for key, values in times.items():
        print(f"  {key:9s} median {statistics.median(values):6.1f} s  {values}")
    for key, against in (
        ("b budget", "a static"),
        ("c jobserver", "a static"),
        ("c jobserver", "d whole"),
    ):
        if key not in times or against not in times:
            continue
        ratios = [b / a for a, b in zip(times[against], times[key], strict=True)]
        pairs = [round(r, 3) for r in ratios]
        print(f"  {key[2:]} / {against[2:]}: {statistics.median(ratios):.3f} (pairs {pairs})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
