#!/usr/bin/env python3
"""Build speed: archguard's nvcc parallelism against torch's defaults and the physical limit.

Builds ``benchmarks/speedpkg`` (two .cu files that include torch headers, and a binding, as
real packages are) side by side in one run, several times, in rotating order:

  (a) archguard's effective list, with archguard's choice of nvcc --threads and jobs;
  (b) the same list with torch's defaults (archguard off, TORCH_CUDA_ARCH_LIST set to it);
  (c) "mirror PyTorch": PyTorch's own list for the index (the bundled table's union over
      its torch releases, with its PTX), with torch's defaults.

It estimates the physical limit from measurements taken in the same run: one serial build
(one job, one thread) of the same list with nvcc's own per-phase timing (``--time``, through
NVCC_APPEND_FLAGS) gives, per .cu, the serial host time h_i (host preprocessing, cudafe++,
fatbinary, the host compile) and the device time d_ik of each target k (its preprocessing,
cicc, ptxas); ninja's log gives the C++ sources' time. On C cores the work is
W = sum_i(h_i + sum_k d_ik) + C++ time and the limit is max(W / C, max_i(h_i + max_k d_ik)):
for F equal files, the issue's F*(h + A*d) / C and h + d. (The first version of this
calibration took d as the difference of two builds, with one and two targets: 12-20 s, where
nvcc's own timing shows 26-38 s per target; the difference of two noisy builds is not a
measurement of d.) The serial build's wall time beyond its compiles (python, torch import,
ninja, link) is printed as the fixed overhead no parallelism removes.
It also measures the cores' real throughput (a CPU-bound loop alone, then one per core at
once): vCPUs that are SMT siblings, or shared with a neighbour, give less than C, and the
limit at that capacity, max(W / capacity, max_i(h_i + d_i)), is printed beside it.

Prints each wall time and peak resident memory (summed over the build's process tree, median
and min-max), the ratios b/a, c/a and a/limit pair by pair, and the machine.

Usage: python benchmarks/build_speed.py [--runs 3]
(on 2 cores: about 10 minutes of calibration, then about 15 minutes a run)
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


def run_build(
    work: Path, env: dict[str, str], python: str = sys.executable
) -> tuple[float, int, Path, str]:
    """One clean ``setup.py build_ext`` of the package under ``python``: (wall s, peak tree
    RSS, build dir, its output)."""
    src = work / "src"
    if src.exists():
        shutil.rmtree(src)
    shutil.copytree(PACKAGE, src)
    temp, lib = src / "build" / "temp", src / "build" / "lib"
    argv = [
        python,
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
    return wall, peak, temp, output


def ninja_times(temp: Path) -> dict[str, float]:
    """Seconds per object from ninja's log (torch's BuildExtension builds with ninja)."""
    out: dict[str, float] = {}
    for line in (temp / ".ninja_log").read_text().splitlines()[1:]:
        start, end, _, target, _ = line.split("\t")
        out[Path(target).name] = (int(end) - int(start)) / 1000
    return out


# nvcc --time phases that run once per source, serially; the rest (gcc preprocessing 1,
# cicc, ptxas) run once per target, and --threads N runs N targets' chains at once.
HOST_PHASES = ("gcc (preprocessing 4)", "cudafe++", "fatbinary", "gcc (compiling)")


def arch_order(number: str) -> tuple[int, str]:
    """Sort key for nvcc's arch numbers: 75 < 90 < 90a < 100 < 120."""
    digits = len(number) - len(number.lstrip("0123456789"))
    return int(number[:digits] or 0), number[digits:]


def nvcc_phases(text: str) -> dict[str, tuple[float, dict[str, float]]]:
    """nvcc --time's CSV: per source stem, (serial host seconds h, {target: device seconds})."""
    out: dict[str, tuple[float, dict[str, float]]] = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) < 8 or cells[0] in ("", "source file name") or cells[7] != "ms":
            continue
        stem = Path(cells[0]).stem
        phase, arch, seconds = cells[1], cells[4], float(cells[6]) / 1000
        h, per_target = out.get(stem, (0.0, {}))
        if phase in HOST_PHASES:
            h += seconds
        elif arch:
            number = arch.split("_", 1)[-1]  # compute_90 (cicc) and sm_90 (ptxas): one target
            per_target[number] = per_target.get(number, 0.0) + seconds
        out[stem] = (h, per_target)
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


def machine(torch_version: str) -> str:
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
    return (
        f"{platform.node()}: {model}; {found.cores} cores ({found.cores_from}), "
        f"{found.memory / (1 << 30):.1f} GiB available ({found.memory_from}); {nvcc.strip()}; "
        f"torch {torch_version}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--cu",
        help="build only these of the extension's .cu files (comma list, e.g. elementwise.cu: "
        "the one-.cu shape of the issue's real package); default: both",
    )
    parser.add_argument(
        "--configs", default="abc", help="which of the builds (a), (b), (c) to time (default abc)"
    )
    parser.add_argument(
        "--capacity-only", action="store_true", help="only measure the cores' real throughput"
    )
    args = parser.parse_args()
    if args.cu:
        os.environ["SPEEDPKG_CU"] = args.cu  # read by speedpkg/setup.py; base_env keeps it
    from archguard.detect.machine import detect_machine

    cores = detect_machine().cores
    if args.capacity_only:
        print(capacity(cores)[1])
        return 0
    listing = json.loads(archguard("list", "--format", "json"))
    ours = listing["effective"]
    tag, torch_version = listing["cuda"], listing["torch"]
    from archguard.core.torchbuild import bundled_builds

    cells = [b for b in bundled_builds() if b.tag == tag]
    union_cubins = sorted({a for c in cells for a in c.build.targets.cubins})
    union_ptx = {a for c in cells for a in c.build.targets.ptx}
    mirror = ";".join(f"{a}+PTX" if a in union_ptx else str(a) for a in union_cubins)
    from archguard.nvcc.parallel import device_compiles

    targets = device_compiles(listing["gencode"])  # the list's own -gencode flags
    print(f"machine: {machine(torch_version)}")
    print(f"(a),(b) list {ours} ({tag}, torch {torch_version}); (c) PyTorch's {tag} union {mirror}")
    with tempfile.TemporaryDirectory(prefix="archguard-speed-") as tmp:
        work = Path(tmp)
        # Calibration: one serial build (one job, one thread) of the same list, with nvcc's
        # own per-phase timing (--time): each source's serial host phases h and its device
        # compile per target d, as nvcc measured them, and the C++ sources from ninja's log.
        csv = work / "phases.csv"
        serial = {
            **base_env(),
            "MAX_JOBS": "1",
            "NVCC_THREADS": "1",
            "NVCC_APPEND_FLAGS": f"--time {csv}",
        }
        serial_wall, _, temp, _ = run_build(work, serial)
        objects = ninja_times(temp)
        phases = nvcc_phases(csv.read_text())
        work_s, path_s, compiles = 0.0, 0.0, 0.0
        print("calibration (serial build, seconds): source  h  d per target")
        for name, seconds in sorted(objects.items()):
            compiles += seconds
            stem = name.split(".")[0]
            if stem in phases:
                h, per_target = phases[stem]
                work_s += h + sum(per_target.values())
                path_s = max(path_s, h + max(per_target.values()))
                by_arch = sorted(per_target.items(), key=lambda kv: arch_order(kv[0]))
                ds = " ".join(f"{t} {d:.1f}" for t, d in by_arch)
                print(f"  {name:<18} h {h:5.1f}  d {ds}  (ninja {seconds:.1f})")
            else:
                work_s += seconds
                path_s = max(path_s, seconds)
                print(f"  {name:<18} {seconds:5.1f} (host only)")
        fixed = max(0.0, serial_wall - compiles)
        print(
            f"  serial build {serial_wall:.1f} s: {compiles:.1f} s of compiles, {fixed:.1f} s "
            "of everything else (python, torch import, ninja, link)"
        )
        limit = max(work_s / cores, path_s)
        cap, said = capacity(cores)
        real_limit = max(work_s / cap, path_s)
        print(
            f"work W = {work_s:.0f} s ({targets} device compiles per .cu); "
            f"limit = max(W/{cores}, {path_s:.0f}) = {limit:.0f} s\n"
            f"{said}; limit at that capacity = max(W/{cap:.2f}, {path_s:.0f}) = "
            f"{real_limit:.0f} s"
        )
        every = {
            "a": base_env(),
            "b": {**base_env(), "ARCHGUARD_DISABLE": "1", "TORCH_CUDA_ARCH_LIST": ours},
            "c": {**base_env(), "ARCHGUARD_DISABLE": "1", "TORCH_CUDA_ARCH_LIST": mirror},
        }
        configs = {k: v for k, v in every.items() if k in args.configs}
        walls: dict[str, list[float]] = {k: [] for k in configs}
        peaks: dict[str, list[float]] = {k: [] for k in configs}
        order = list(configs)
        for run in range(args.runs):
            turn = run % len(order)
            for name in order[turn:] + order[:turn]:
                wall, peak, _, output = run_build(work, configs[name])
                if name == "a" and run == 0:
                    chosen = [x for x in output.splitlines() if x.startswith("archguard: parallel")]
                    print(f"  (a) {chosen[0] if chosen else 'no parallel line in the log'}")
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
        if name not in walls:
            continue
        print(f"  {label:<46} {stats(walls[name])} s   peak {stats(peaks[name], '{:.2f}')} GiB")
    print(f"  {'estimated physical limit':<46} {limit:.1f} s")
    print(f"  {'limit at the measured capacity':<46} {real_limit:.1f} s")
    print(
        f"  {'limit + the fixed overhead':<46} {limit + fixed:.1f} s "
        f"(python, torch import, ninja, link: {fixed:.1f} s in the serial build)"
    )
    if "a" not in walls:
        return 0
    for other in [k for k in ("b", "c") if k in walls]:
        ratios = [x / y for x, y in zip(walls[other], walls["a"], strict=True)]
        print(f"  ratio {other}/a    {stats(ratios, '{:.3f}')}")
    for what, bound in (
        ("a/limit", limit),
        ("a/limit at the measured capacity", real_limit),
        ("a/(limit + the fixed overhead)", limit + fixed),
    ):
        print(f"  ratio {what} {stats([a / bound for a in walls['a']], '{:.3f}')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
