"""Choosing nvcc's ``--threads`` and the number of parallel compile jobs for a build.

Pure: the machine (cores, memory) and the workload (sources, device compiles per CUDA source)
are data (:mod:`archguard.detect.machine` reads the real machine). A compile of a ``.cu`` with
torch headers is serial host work (front end, host compiler) plus one device compile (cicc,
ptxas) per virtual arch; nvcc's ``--threads N`` runs up to N of those at once, and ninja runs
``MAX_JOBS`` compiles at once.

The rule keeps one compiler process per core: enough to keep the cores busy, never more.
Extra processes only time-share the cores while each holds a multi-GiB working set: with
``benchmarks/build_speed.py``'s extension on 2 cores (two .cu files with torch headers and a
binding, six device compiles each), the first rule's 2 jobs x 2 threads was 2 % and 11 %
slower than torch's defaults in paired runs, 3 jobs x 2 threads took 451 s where 2 jobs x 1
thread took 281 s, and 2 x 1 is at 1.06x the physical limit (docs/build-speed.md). With C
cores and S = memory / memory-per-thread slots:
- jobs = min(sources, C, S), at least 1 (``MAX_JOBS`` or ``max_jobs`` win);
- threads = min(device compiles, min(C, S) / min(CUDA sources, jobs)), at least 1
  (``NVCC_THREADS``, ``--threads``/``-t`` in the package's nvcc flags, or ``nvcc_threads``
  win): the cores the CUDA jobs leave, shared among them. When the threads are decided, the
  chosen jobs shrink to min(C, S) / threads.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from archguard import jobserver
from archguard.detect.machine import Machine

GIB = 1 << 30
# Peak resident memory of one nvcc compile thread of a .cu that includes torch headers:
# 2.97 GB measured (/usr/bin/time -v, nvcc 13.0, torch 2.13 headers, the largest process
# of the compile); benchmarks/build_speed.py reports the whole tree's peak beside it.
MEMORY_PER_THREAD = 3 * GIB


# a count archguard chose itself (not set by MAX_JOBS, NVCC_THREADS or the package)
CHOSEN = "chosen"


@dataclass(frozen=True)
class Workload:
    cuda_sources: int
    cxx_sources: int
    targets: int  # device compiles per CUDA source: one per virtual arch (device_compiles)


@dataclass(frozen=True)
class Decided:
    """A setting someone already chose: the value and who (``MAX_JOBS``, the package...)."""

    value: int
    origin: str


class BuildMode(str, enum.Enum):
    """How an extension's sources really compile."""

    NINJA = "ninja"  # torch's BuildExtension with ninja: MAX_JOBS compiles at once
    SERIAL = "serial"  # setuptools' compiler: one source after another

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Choice:
    jobs: int
    jobs_from: str  # "chosen" or who decided
    threads: int
    threads_from: str
    why: str  # the inputs, in words, for the log and explain
    mode: BuildMode = BuildMode.NINJA
    mode_from: str = ""  # why that mode ("use_ninja=False", "ninja is not installed")

    @property
    def jobs_chosen(self) -> bool:
        """archguard chose the jobs (nobody set them)."""
        return self.jobs_from == CHOSEN

    @property
    def summary(self) -> str:
        if self.mode is BuildMode.SERIAL:
            return (
                f"setuptools compiles one source at a time ({self.mode_from}): nvcc --threads "
                f"{self.threads} ({self.threads_from})"
            )
        return (
            f"{self.jobs} parallel compile job{'s' if self.jobs != 1 else ''} "
            f"({self.jobs_from}), nvcc --threads {self.threads} ({self.threads_from})"
        )

    def record(self) -> dict[str, object]:
        return {
            "mode": self.mode.value,
            "mode_from": self.mode_from,
            "jobs": self.jobs,
            "jobs_from": self.jobs_from,
            "threads": self.threads,
            "threads_from": self.threads_from,
        }


@dataclass(frozen=True)
class Asked:
    """What the user, the farm or the package already decided, and what was refused."""

    jobs: Decided | None = None
    threads: Decided | None = None
    warnings: tuple[str, ...] = ()


def _count(name: str, value: str | None, origin: str, warnings: list[str]) -> Decided | None:
    if value is None or not value.strip():
        return None
    text = value.strip()
    if not text.isdigit() or int(text) < 1:
        warnings.append(f"{name}={value!r} is not a positive whole number; archguard ignores it")
        return None
    return Decided(int(text), origin)


class PackageSettings(Protocol):
    """What ``asked`` reads of a ``[tool.archguard]`` table (a PackageConfig)."""

    @property
    def source(self) -> str: ...
    @property
    def max_jobs(self) -> int | None: ...
    @property
    def nvcc_threads(self) -> int | None: ...


def asked(
    environ: Mapping[str, str],
    package: PackageSettings | None = None,
    flag_threads: Decided | None = None,
) -> Asked:
    """The one reading of the parallel settings, for ``explain`` and the build alike:
    ``MAX_JOBS`` then ``[tool.archguard] max_jobs``; the package's own ``--threads``, then
    ``NVCC_THREADS``, then ``nvcc_threads``. A value that is not a positive whole number
    (``MAX_JOBS=0``) is ignored with a warning, the same everywhere."""
    warnings: list[str] = []
    package_jobs = package_threads = None
    if package is not None and package.max_jobs:
        package_jobs = Decided(package.max_jobs, f"{package.source} max_jobs")
    if package is not None and package.nvcc_threads:
        package_threads = Decided(package.nvcc_threads, f"{package.source} nvcc_threads")
    jobs = _count("MAX_JOBS", environ.get("MAX_JOBS"), "MAX_JOBS", warnings) or package_jobs
    env_threads = _count("NVCC_THREADS", environ.get("NVCC_THREADS"), "NVCC_THREADS", warnings)
    threads = flag_threads or env_threads or package_threads
    return Asked(jobs, threads, tuple(warnings))


@dataclass(frozen=True)
class RunsAs:
    """How an extension builds: its mode and why, and how many extensions build at once
    (``build_ext --parallel``), dividing the cores among them."""

    mode: BuildMode = BuildMode.NINJA
    mode_from: str = ""
    sharing: int = 1


def decided_parallelism(
    machine: Machine, work: Workload, settings: Asked, runs: RunsAs | None = None
) -> Choice:
    """The choice for one extension in the mode it really builds in: the one decision
    ``explain`` previews and the build makes."""
    runs = runs or RunsAs()
    mode, mode_from, sharing = runs.mode, runs.mode_from, runs.sharing
    if sharing > 1:
        machine = Machine(
            max(1, machine.cores // sharing),
            f"{machine.cores_from}, shared by {sharing} extensions building at once",
            machine.memory // sharing,
            machine.memory_from,
        )
    jobs = settings.jobs
    if mode is BuildMode.SERIAL:
        jobs = Decided(1, f"setuptools compiles one source at a time ({mode_from})")
    choice = choose(machine, work, jobs, settings.threads)
    return Choice(
        choice.jobs,
        choice.jobs_from,
        choice.threads,
        choice.threads_from,
        choice.why,
        mode,
        mode_from or "torch's BuildExtension with ninja",
    )


def choose(
    machine: Machine,
    work: Workload,
    jobs: Decided | None = None,
    threads: Decided | None = None,
    memory_per_thread: int = MEMORY_PER_THREAD,
) -> Choice:
    cores = max(1, machine.cores)
    slots = max(1, machine.memory // memory_per_thread)
    sources = max(1, work.cuda_sources + work.cxx_sources)
    targets = max(1, work.targets)
    if jobs is not None:
        n_jobs, jobs_from = max(1, jobs.value), f"set by {jobs.origin}"
    else:
        n_jobs, jobs_from = max(1, min(sources, cores, slots)), CHOSEN
    cuda_jobs = max(1, min(max(1, work.cuda_sources), n_jobs))
    if threads is not None:
        n_threads, threads_from = max(1, threads.value), f"set by {threads.origin}"
        if jobs is None:  # fill the cores around the package's or user's own threads
            n_jobs = max(1, min(n_jobs, min(cores, slots) // n_threads))
    else:
        share = min(cores, slots) // cuda_jobs
        n_threads, threads_from = max(1, min(targets, share)), CHOSEN
    why = (
        f"{machine.cores} core{'s' if machine.cores != 1 else ''} ({machine.cores_from}), "
        f"{machine.memory / GIB:.1f} GiB memory ({machine.memory_from}: room for {slots} "
        f"compiler thread{'s' if slots != 1 else ''} at {memory_per_thread / GIB:.0f} GiB "
        f"each), {work.cuda_sources} CUDA and {work.cxx_sources} C++ source"
        f"{'s' if work.cxx_sources != 1 else ''}, {work.targets} device compile"
        f"{'s' if work.targets != 1 else ''} (virtual arch{'s' if work.targets != 1 else ''}) "
        "per CUDA source"
    )
    return Choice(n_jobs, jobs_from, n_threads, threads_from, why)


def device_compiles(gencode: list[str]) -> int:
    """How many device compiles one nvcc call runs for these ``-gencode`` flags: one per
    virtual arch (``arch=compute_90``); a cubin and the PTX of the same virtual arch share it
    (nvcc --time: one cicc for compute_90, then ptxas for sm_90). Read as archguard's nvcc
    launcher reads a whole nvcc line (:func:`archguard.jobserver.device_compiles`)."""
    return jobserver.device_compiles(gencode) if gencode else 0


def jobserver_width(machine: Machine, memory_per_thread: int = MEMORY_PER_THREAD) -> int:
    """The jobs at once a jobserver stands for (its tokens, the implicit one included): one
    per core, no more than the memory holds compiler threads."""
    return max(1, min(machine.cores, machine.memory // memory_per_thread))
