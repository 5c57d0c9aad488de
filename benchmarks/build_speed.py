#!/usr/bin/env python3
"""Build speed: archguard's nvcc parallelism against torch's defaults and the physical limit.

Builds ``benchmarks/speedpkg`` (two .cu files that include torch headers, and a binding, as
real packages are) side by side in one run, several times, in rotating order:

  (a) archguard's effective list, with archguard's choice of nvcc --threads and jobs;
  (b) the same list with torch's defaults (archguard off, TORCH_CUDA_ARCH_LIST set to it);
  (c) "mirror PyTorch": PyTorch's own list for the index (the bundled table's union over
      its torch releases, with its PTX), with torch's defaults.

It estimates the physical limit from measurements taken in the same run: two serial builds
(one job, one thread) with one and with two targets give, per source, the serial host time
h and the per-target device time d (from ninja's log). For sources i with A targets on C
cores the work is W = sum_i(h_i + A*d_i) + C++ time, and the limit is
max(W / C, max_i(h_i + d_i)). (For F equal files this is the issue's F*(h + A*d) / C.)
It also measures the cores' real throughput (a CPU-bound loop alone, then one per core at
once): vCPUs that are SMT siblings, or shared with a neighbour, give less than C, and the
limit at that capacity, max(W / capacity, max_i(h_i + d_i)), is printed beside it.

Prints each wall time and peak resident memory (summed over the build's process tree, median
and min-max), the ratios b/a, c/a and a/limit pair by pair, and the machine.

Usage: python benchmarks/build_speed.py [--runs 3]   (about 15 minutes a run on 2 cores)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PACKAGE = HERE / "speedpkg"


def tree_rss(root: int) -> int:
    """Resident memory of a process and all its descendants, in bytes."""
    children: dict[int, list[int]] = {}
    for proc_dir in Path("/proc").iterdir():
        entry = proc_dir.name
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(entry))
        except (OSError, IndexError, ValueError):
            continue
    total, stack = 0, [root]
    while stack:
        pid = stack.pop()
        stack += children.get(pid, [])
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) * 1024
                        break
        except OSError:
            continue
    return total


def run_build(work: Path, env: dict[str, str]) -> tuple[float, int, Path]:
    """One clean ``setup.py build_ext`` of the package: (wall s, peak tree RSS, build dir)."""
    src = work / "src"
    if src.exists():
        shutil.rmtree(src)
    shutil.copytree(PACKAGE, src)
    temp, lib = src / "build" / "temp", src / "build" / "lib"
    argv = [
        sys.executable,
        "setup.py",
        "build_ext",
        "--build-temp",
        str(temp),
        "--build-lib",
        str(lib),
    ]
    peak = 0
    start = time.perf_counter()
    proc = subprocess.Popen(
        argv, cwd=src, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, tree_rss(proc.pid))
            done.wait(0.2)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    output, _ = proc.communicate()
    wall = time.perf_counter() - start
    done.set()
    sampler.join()
    if proc.returncode != 0:
        sys.stderr.write(output[-4000:])
        raise SystemExit(f"build failed ({argv})")
    (work / f"log-{int(start)}.txt").write_text(output)
    return wall, peak, temp


def ninja_times(temp: Path) -> dict[str, float]:
    """Seconds per object from ninja's log (torch's BuildExtension builds with ninja)."""
    out: dict[str, float] = {}
    for line in (temp / ".ninja_log").read_text().splitlines()[1:]:
        start, end, _, target, _ = line.split("\t")
        out[Path(target).name] = (int(end) - int(start)) / 1000
    return out


def base_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARCHGUARD_")}
    for name in ("MAX_JOBS", "NVCC_THREADS", "TORCH_CUDA_ARCH_LIST"):
        env.pop(name, None)
    env.setdefault("CUDA_HOME", "/usr/local/cuda")
    env["CUDA_VISIBLE_DEVICES"] = ""
    return env


def archguard(*args: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "archguard", *args, "--project", str(PACKAGE)],
        capture_output=True,
        text=True,
        env=base_env(),
        check=True,
    )
    return proc.stdout


SPIN = "x = 0\nfor i in range(60_000_000):\n    x += i * i\n"


def capacity(cores: int) -> tuple[float, str]:
    """How many cores' worth of throughput the machine gives: a CPU-bound loop timed alone,
    then ``cores`` copies at once (best of three each). A machine whose cores are SMT
    siblings, or shared with a busy neighbour, gives less than ``cores``: (capacity, the
    line that says so)."""

    def timed(n: int) -> float:
        start = time.perf_counter()
        procs = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(n)]
        for proc in procs:
            proc.wait()
        return time.perf_counter() - start

    alone = min(timed(1) for _ in range(3))
    together = min(timed(cores) for _ in range(3))
    cap = cores * alone / together
    return cap, (
        f"capacity: {cap:.2f} cores' worth of throughput from {cores} cores "
        f"(one CPU-bound loop {alone:.1f} s; {cores} at once {together:.1f} s)"
    )


def stats(values: list[float], fmt: str = "{:.1f}") -> str:
    return (
        f"{fmt.format(statistics.median(values))} "
        f"({fmt.format(min(values))}-{fmt.format(max(values))})"
    )


def machine() -> str:
    model = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    from archguard.detect.machine import detect_machine

    found = detect_machine()
    nvcc = (
        subprocess.run(
            [f"{base_env()['CUDA_HOME']}/bin/nvcc", "--version"],
            capture_output=True,
            text=True,
            check=False,
        )
        .stdout.strip()
        .splitlines()[-2]
    )
    import torch

    return (
        f"{platform.node()}: {model}; {found.cores} cores ({found.cores_from}), "
        f"{found.memory / (1 << 30):.1f} GiB available ({found.memory_from}); {nvcc.strip()}; "
        f"torch {torch.__version__}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--capacity-only", action="store_true", help="only measure the cores' real throughput"
    )
    args = parser.parse_args()
    from archguard.detect.machine import detect_machine

    cores = detect_machine().cores
    if args.capacity_only:
        print(capacity(cores)[1])
        return 0
    listing = json.loads(archguard("list", "--format", "json"))
    ours = listing["effective"]
    tag, torch_version = listing["cuda"], listing["torch"]
    from archguard.torchbuild import bundled_builds

    cells = [b for b in bundled_builds() if b.tag == tag]
    union_cubins = sorted({a for c in cells for a in c.build.targets.cubins})
    union_ptx = {a for c in cells for a in c.build.targets.ptx}
    mirror = ";".join(f"{a}+PTX" if a in union_ptx else str(a) for a in union_cubins)
    targets = len(listing["targets"]["cubins"])  # one device compile per virtual arch
    print(f"machine: {machine()}")
    print(f"(a),(b) list {ours} ({tag}, torch {torch_version}); (c) PyTorch's {tag} union {mirror}")
    with tempfile.TemporaryDirectory(prefix="archguard-speed-") as tmp:
        work = Path(tmp)
        # Calibration: serial builds, one job and one thread, with one and with two targets,
        # twice each in alternation; the faster of the two per object (a shared machine's
        # noise only ever adds time).
        serial = {**base_env(), "MAX_JOBS": "1", "NVCC_THREADS": "1"}
        one: dict[str, float] = {}
        two: dict[str, float] = {}
        for _ in range(2):
            for into, arches in ((one, "8.0"), (two, "8.0;8.6")):
                times = ninja_times(run_build(work, {**serial, "ARCHGUARD_ARCH_LIST": arches})[2])
                for name, seconds in times.items():
                    into[name] = min(seconds, into.get(name, seconds))
        work_s, path_s = 0.0, 0.0
        print("calibration (serial, seconds): source  h  d  (one target, two targets)")
        cuda_stems = {p.stem for p in (PACKAGE / "csrc").glob("*.cu")}
        for name in sorted(one):
            if name.split(".")[0] in cuda_stems:
                d = max(0.0, two[name] - one[name])
                h = max(0.0, one[name] - d)
                work_s += h + targets * d
                path_s = max(path_s, h + d)
                print(f"  {name:<24} h {h:6.1f}  d {d:6.1f}  ({one[name]:.1f}, {two[name]:.1f})")
            else:
                t = (one[name] + two[name]) / 2
                work_s += t
                path_s = max(path_s, t)
                print(f"  {name:<24} {t:6.1f} (host only)")
        limit = max(work_s / cores, path_s)
        cap, said = capacity(cores)
        real_limit = max(work_s / cap, path_s)
        print(
            f"work W = {work_s:.0f} s over {targets} targets; "
            f"limit = max(W/{cores}, {path_s:.0f}) = {limit:.0f} s\n"
            f"{said}; limit at that capacity = max(W/{cap:.2f}, {path_s:.0f}) = "
            f"{real_limit:.0f} s"
        )
        configs = {
            "a": base_env(),
            "b": {**base_env(), "ARCHGUARD_DISABLE": "1", "TORCH_CUDA_ARCH_LIST": ours},
            "c": {**base_env(), "ARCHGUARD_DISABLE": "1", "TORCH_CUDA_ARCH_LIST": mirror},
        }
        walls: dict[str, list[float]] = {k: [] for k in configs}
        peaks: dict[str, list[float]] = {k: [] for k in configs}
        order = list(configs)
        for run in range(args.runs):
            for name in order[run % 3 :] + order[: run % 3]:
                wall, peak, _ = run_build(work, configs[name])
                walls[name].append(wall)
                peaks[name].append(peak / (1 << 30))
                print(
                    f"  run {run + 1} ({name}): {wall:7.1f} s, peak {peak / (1 << 30):5.2f} GiB",
                    flush=True,
                )
    print(f"\nwall seconds, median (min-max) of {args.runs} runs; peak RSS of the process tree")
    labels = {
        "a": "(a) archguard list, archguard's parallelism",
        "b": "(b) archguard list, torch's defaults",
        "c": "(c) mirror PyTorch, torch's defaults",
    }
    for name, label in labels.items():
        print(f"  {label:<46} {stats(walls[name])} s   peak {stats(peaks[name], '{:.2f}')} GiB")
    print(f"  {'estimated physical limit':<46} {limit:.1f} s")
    print(f"  {'limit at the measured capacity':<46} {real_limit:.1f} s")
    for other in ("b", "c"):
        ratios = [x / y for x, y in zip(walls[other], walls["a"], strict=True)]
        print(f"  ratio {other}/a    {stats(ratios, '{:.3f}')}")
    ratios = [a / limit for a in walls["a"]]
    print(f"  ratio a/limit {stats(ratios, '{:.3f}')}")
    ratios = [a / real_limit for a in walls["a"]]
    print(f"  ratio a/limit at the measured capacity {stats(ratios, '{:.3f}')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
