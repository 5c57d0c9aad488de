"""The cores and memory a build may really use: CPU affinity and the cgroup CPU quota (not
just the core count), and the cgroup memory limit and ``MemAvailable``.

The parsers take the files' text, so tests feed them data; :func:`detect_machine` reads the
real files (cgroup v2 first, then v1).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Machine:
    """What the build may use: cores and memory, each with where the number came from."""

    cores: int
    cores_from: str
    memory: int  # bytes
    memory_from: str


def parse_cpu_max(text: str) -> float | None:
    """cgroup v2 ``cpu.max`` (``"200000 100000"`` -> 2.0; ``"max 100000"`` -> None)."""
    parts = text.split()
    if len(parts) != 2 or parts[0] == "max":
        return None
    try:
        quota, period = int(parts[0]), int(parts[1])
    except ValueError:
        return None
    return quota / period if quota > 0 and period > 0 else None


def parse_cfs(quota: str, period: str) -> float | None:
    """cgroup v1 ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us`` (-1: no quota)."""
    try:
        q, p = int(quota.strip()), int(period.strip())
    except ValueError:
        return None
    return q / p if q > 0 and p > 0 else None


def parse_meminfo(text: str) -> int | None:
    """``MemAvailable`` from ``/proc/meminfo``, in bytes."""
    for line in text.splitlines():
        if line.startswith("MemAvailable:"):
            fields = line.split()
            try:
                return int(fields[1]) * 1024
            except (IndexError, ValueError):
                return None
    return None


def parse_memory_limit(limit: str, usage: str = "0") -> int | None:
    """A cgroup memory limit minus what the group already uses ("max" / huge: None)."""
    text = limit.strip()
    if text in ("", "max"):
        return None
    try:
        value = int(text)
        used = int(usage.strip() or 0)
    except ValueError:
        return None
    if value >= 1 << 60:  # v1 reports "no limit" as a huge number
        return None
    return max(0, value - used)


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def detect_machine(
    root: Path = Path("/"),
    affinity: Callable[[], int] | None = None,
) -> Machine:
    """Cores: min(CPU affinity, cgroup quota rounded down, at least 1). Memory:
    min(MemAvailable, cgroup limit minus usage)."""
    if affinity is None:
        count = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
        cpus = count or os.cpu_count() or 1
        cores_from = f"CPU affinity {cpus}"
    else:
        cpus = affinity()
        cores_from = f"CPU affinity {cpus}"
    cgroup = root / "sys" / "fs" / "cgroup"
    quota = None
    text = _read(cgroup / "cpu.max")
    if text is not None:
        quota = parse_cpu_max(text)
    else:
        q, p = (
            _read(cgroup / "cpu" / "cpu.cfs_quota_us"),
            _read(cgroup / "cpu" / "cpu.cfs_period_us"),
        )
        if q is not None and p is not None:
            quota = parse_cfs(q, p)
    cores = cpus
    if quota is not None:
        cores_from += f", cgroup quota {quota:g}"
        cores = max(1, min(cpus, math.floor(quota)))
    else:
        cores_from += ", no cgroup quota"
    available = parse_meminfo(_read(root / "proc" / "meminfo") or "")
    memory_from = "MemAvailable" if available is not None else "unknown (assumed 8 GiB)"
    memory = available if available is not None else 8 << 30
    limit = None
    text = _read(cgroup / "memory.max")
    if text is not None:
        limit = parse_memory_limit(text, _read(cgroup / "memory.current") or "0")
    else:
        v1 = _read(cgroup / "memory" / "memory.limit_in_bytes")
        if v1 is not None:
            limit = parse_memory_limit(
                v1, _read(cgroup / "memory" / "memory.usage_in_bytes") or "0"
            )
    if limit is not None and limit < memory:
        memory, memory_from = limit, "cgroup memory limit"
    return Machine(cores, cores_from, memory, memory_from)


TORCH_FLOOR = (2, 28)  # torch's own Linux wheels: manylinux_2_28 (PyTorch's builder image)


def glibc_version(confstr: Callable[[str], str | None] | None = None) -> tuple[int, int] | None:
    """This machine's glibc (2, 36), or None (musl, or not Linux)."""
    ask = confstr or os.confstr
    try:
        text = ask("CS_GNU_LIBC_VERSION") or ""
    except (ValueError, OSError):
        return None
    name, _, version = text.partition(" ")
    parts = version.split(".")
    if name != "glibc" or len(parts) < 2 or not all(p.isdigit() for p in parts[:2]):
        return None
    return int(parts[0]), int(parts[1])


def floor_note(glibc: tuple[int, int] | None) -> str | None:
    """What this builder's glibc does to a wheel's platform floor, where it is above torch's
    (None: at or below it, or not glibc)."""
    if glibc is None or glibc <= TORCH_FLOOR:
        return None
    floor = f"manylinux_{glibc[0]}_{glibc[1]}"
    torch = f"manylinux_{TORCH_FLOOR[0]}_{TORCH_FLOOR[1]}"
    return (
        f"platform floor: this builder's glibc is {glibc[0]}.{glibc[1]}, so its wheels may need "
        f"up to {floor} (auditwheel tags each by the symbols it uses), above torch's own "
        f"{torch}: machines with glibc {TORCH_FLOOR[0]}.{TORCH_FLOOR[1]}-{glibc[0]}."
        f"{glibc[1] - 1} (RHEL 8 and its rebuilds, Ubuntu 20.04 and 22.04) install torch and "
        "may find no wheel of this farm's. Build where torch is built: `archguard farm "
        "workflow` runs its jobs in pytorch/manylinux2_28-builder:cudaX.Y."
    )
