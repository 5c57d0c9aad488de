"""Choosing nvcc's ``--threads`` and the number of parallel compile jobs for a build.

Pure: the machine (cores, memory) and the workload (sources, targets per CUDA compile) are
data (:mod:`archguard.detect.machine` reads the real machine). A compile of a ``.cu`` with
torch headers is serial host work (front end, host compiler) plus one device compile per
target; nvcc's ``--threads N`` runs up to N of those device compiles at once, and ninja runs
``MAX_JOBS`` compiles at once. The choice keeps the cores busy to the end of the build
(the last CUDA file's targets spread over the cores the finished jobs left idle) without
running more compiler threads than memory holds.

The rule, with C cores and S = memory / memory-per-thread slots:
- jobs = min(sources, C, S), at least 1 (``MAX_JOBS`` or ``max_jobs`` win);
- threads = min(C, targets, min(2C, S) / min(CUDA sources, jobs)), at least 1
  (``NVCC_THREADS``, ``--threads``/``-t`` in the package's nvcc flags, or ``nvcc_threads``
  win); two threads per core at most in total, so that a tail never idles a core while
  memory allows it.
"""

from __future__ import annotations

from dataclasses import dataclass

GIB = 1 << 30
# Peak resident memory of one nvcc compile thread of a .cu that includes torch headers:
# 2.97 GB measured (/usr/bin/time -v, nvcc 13.0, torch 2.13 headers, the largest process
# of the compile); benchmarks/build_speed.py reports the whole tree's peak beside it.
MEMORY_PER_THREAD = 3 * GIB


@dataclass(frozen=True)
class Machine:
    """What the build may use: cores and memory, each with where the number came from."""

    cores: int
    cores_from: str
    memory: int  # bytes
    memory_from: str


@dataclass(frozen=True)
class Workload:
    cuda_sources: int
    cxx_sources: int
    targets: int  # device compiles per CUDA source (cubins, and PTX of its own virtual arch)


@dataclass(frozen=True)
class Decided:
    """A setting someone already chose: the value and who (``MAX_JOBS``, the package...)."""

    value: int
    origin: str


@dataclass(frozen=True)
class Choice:
    jobs: int
    jobs_from: str  # "chosen" or who decided
    threads: int
    threads_from: str
    why: str  # the inputs, in words, for the log and explain

    @property
    def summary(self) -> str:
        return (
            f"{self.jobs} parallel compile job{'s' if self.jobs != 1 else ''} "
            f"({self.jobs_from}), nvcc --threads {self.threads} ({self.threads_from})"
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
        n_jobs, jobs_from = max(1, min(sources, cores, slots)), "chosen"
    cuda_jobs = max(1, min(max(1, work.cuda_sources), n_jobs))
    if threads is not None:
        n_threads, threads_from = max(1, threads.value), f"set by {threads.origin}"
        if jobs is None:  # fill the cores around the package's or user's own threads
            n_jobs = max(1, min(n_jobs, min(2 * cores, slots) // n_threads))
    else:
        share = min(2 * cores, slots) // cuda_jobs
        n_threads, threads_from = max(1, min(cores, targets, share)), "chosen"
    why = (
        f"{machine.cores} core{'s' if machine.cores != 1 else ''} ({machine.cores_from}), "
        f"{machine.memory / GIB:.1f} GiB memory ({machine.memory_from}: room for {slots} "
        f"compiler thread{'s' if slots != 1 else ''} at {memory_per_thread / GIB:.0f} GiB "
        f"each), {work.cuda_sources} CUDA and {work.cxx_sources} C++ source"
        f"{'s' if work.cxx_sources != 1 else ''}, {work.targets} target"
        f"{'s' if work.targets != 1 else ''} per CUDA compile"
    )
    return Choice(n_jobs, jobs_from, n_threads, threads_from, why)
