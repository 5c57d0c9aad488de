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


# The glibc of each long-term release of the two distributions a farm's users name most:
# a wheel whose tag needs glibc X.Y installs on the first of each at or above it, and later.
DISTRIBUTIONS: tuple[tuple[str, tuple[tuple[str, tuple[int, int]], ...]], ...] = (
    ("RHEL", (("7", (2, 17)), ("8", (2, 28)), ("9", (2, 34)), ("10", (2, 39)))),
    (
        "Ubuntu",
        (
            ("14.04", (2, 19)),
            ("16.04", (2, 23)),
            ("18.04", (2, 27)),
            ("20.04", (2, 31)),
            ("22.04", (2, 35)),
            ("24.04", (2, 39)),
        ),
    ),
)
# PEP 600's aliases: the legacy manylinux tags and the glibc each promises
_LEGACY = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}


def platform_glibc(platform: str) -> tuple[int, int] | None:
    """The glibc a wheel's platform tag needs (``manylinux_2_28_x86_64`` -> (2, 28),
    ``manylinux2014_x86_64`` -> (2, 17)); a compressed set (``a.b``) needs the lowest of its
    tags; None where no tag is manylinux (``linux_x86_64``, musllinux)."""
    found = []
    for tag in platform.split("."):
        legacy = next((v for k, v in _LEGACY.items() if tag.startswith(f"{k}_")), None)
        parts = tag.split("_")
        if legacy is not None:
            found.append(legacy)
        elif (
            parts[0] == "manylinux" and len(parts) > 3 and parts[1].isdigit() and parts[2].isdigit()
        ):
            found.append((int(parts[1]), int(parts[2])))
    return min(found) if found else None


def glibc_floor_text(glibc: tuple[int, int]) -> str:
    """``glibc >= 2.28 (RHEL 8, Ubuntu 20.04 and newer)``: the glibc and the first long-term
    release of each distribution that has it."""
    first = []
    for name, releases in DISTRIBUTIONS:
        release = next((r for r, has in releases if has >= glibc), None)
        if release is not None:
            first.append(f"{name} {release}")
    where = (
        f" ({', '.join(first)} and newer)"
        if first
        else " (newer than every RHEL and Ubuntu LTS release archguard knows)"
    )
    return f"glibc >= {glibc[0]}.{glibc[1]}{where}"


def platform_floor(platform: str) -> str:
    """What a wheel's platform tag asks of a machine, in words: its glibc floor and the
    distributions at or above it, and, above torch's own ``manylinux_2_28``, which machines
    install torch and not the wheel; a tag that is not manylinux says so."""
    glibc = platform_glibc(platform)
    if glibc is None:
        return (
            f"no glibc floor stated: {platform} is not a manylinux tag (not repaired: it "
            "needs at least its builder's glibc)"
        )
    text = glibc_floor_text(glibc)
    if glibc > TORCH_FLOOR:
        text += (
            f"; above torch's own manylinux_{TORCH_FLOOR[0]}_{TORCH_FLOOR[1]}: a machine with "
            f"glibc {TORCH_FLOOR[0]}.{TORCH_FLOOR[1]}-{glibc[0]}.{glibc[1] - 1} installs torch "
            "and not this wheel"
        )
    return text
