"""How a farm run uses the machine (issue 51): the order its sources are built in (the
longest first, so that a run does not end on one long job alone) and, at its end, the cores'
use: utilization = CPU-seconds of the builds / (wall x cores), and the run's distance from
its limit, max(CPU-seconds / cores, the longest job)."""

from __future__ import annotations

import contextlib
import resource
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from archguard.detect.machine import detect_machine
from archguard.detect.sources import CUDA_FILES, tree_files
from archguard.errors import ConfigError
from archguard.farm.ledger import Outcome
from archguard.farm.plan import Job
from archguard.settings.config import ENV_COMPILER_CACHE, env_choice


def estimate(jobs: Sequence[Job], ledgers: Mapping[str, Outcome]) -> tuple[bool, float]:
    """A source's jobs' expected length, as a sort key: (measured, amount). Measured: the
    seconds each job last took (its own ledger, else its package's latest in its cell).
    Where none ran yet: its tree's CUDA code in bytes (a build's time grows with it), which
    every measured source outranks."""
    by_pair = {(r.package, r.cell): r.seconds for r in ledgers.values() if r.seconds}
    seconds = [
        (ledgers[j.id].seconds if j.id in ledgers else 0.0)
        or by_pair.get((j.package.name, j.cell.name), 0.0)
        for j in jobs
    ]
    if any(seconds):
        return True, sum(seconds)
    return False, float(_cuda_bytes(Path(jobs[0].package.source))) if jobs else 0.0


def _cuda_bytes(tree: Path) -> int:
    """The size of a tree's CUDA sources and headers; 0 for an sdist or a release (its size
    is unknown until it is fetched)."""
    if not tree.is_dir():
        return 0
    total = 0
    for name in tree_files(tree):
        if name.endswith(CUDA_FILES):
            with contextlib.suppress(OSError):
                total += Path(name).stat().st_size
    return total


def longest_first(
    groups: Sequence[list[tuple[int, Job]]], ledgers: Mapping[str, Outcome]
) -> list[list[tuple[int, Job]]]:
    """The groups (one source's jobs each), the longest expected first; ties keep the plan's
    order."""
    return sorted(groups, key=lambda g: estimate([job for _, job in g], ledgers), reverse=True)


@dataclass(frozen=True)
class Usage:
    """The run's use of the machine."""

    wall: float
    cpu: float  # CPU-seconds of every process the run waited for (the builds)
    cores: int
    longest: float  # the longest job's wall time

    @property
    def utilization(self) -> float:
        return self.cpu / (self.wall * self.cores) if self.wall > 0 else 0.0

    @property
    def limit(self) -> float:
        """The least wall time this work could take on these cores."""
        return max(self.cpu / self.cores, self.longest)

    def line(self, aside: str = "") -> str:
        """The summary's line (``aside``: what the CPU leaves out, :func:`uncounted`)."""
        distance = f"{self.wall / self.limit:.2f}x" if self.limit > 0 else "n/a"
        return (
            f"cores: {self.cores}, wall {self.wall:.0f} s, the builds' CPU {self.cpu:.0f} s: "
            f"utilization {self.utilization:.2f}; the limit max(CPU / cores, the longest job "
            f"{self.longest:.0f} s) is {self.limit:.0f} s: this run took {distance} of it{aside}"
        )

    def as_json(self) -> dict[str, float | int]:
        return {
            "wall_s": round(self.wall, 1),
            "cpu_s": round(self.cpu, 1),
            "cores": self.cores,
            "utilization": round(self.utilization, 3),
            "limit_s": round(self.limit, 1),
        }


class Meter:
    """Started when the run starts; :meth:`usage` at its end."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.cpu = _children_cpu()

    def usage(self, outcomes: Sequence[Outcome], cores: int | None = None) -> Usage:
        return Usage(
            time.monotonic() - self.started,
            _children_cpu() - self.cpu,
            cores or detect_machine().cores,
            max((o.seconds for o in outcomes), default=0.0),
        )


def _children_cpu() -> float:
    """User and system seconds of every child process waited for (their own children's
    included: pip's nvcc, ninja's compiles)."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def uncounted(environ: Mapping[str, str]) -> str:
    """What a run's CPU-seconds leave out, as the usage line's aside: sccache compiles in
    its own server, outside the run's processes."""
    try:
        chosen = env_choice(environ, ENV_COMPILER_CACHE, "compiler_cache")
    except ConfigError:  # each build said so; the run's summary still comes
        return ""
    if chosen != "sccache":
        return ""
    return (
        " (sccache compiles in its own server, outside the run's processes: its CPU is not counted)"
    )
