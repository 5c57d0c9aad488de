"""The coverage rule: which devices a set of cubins and PTX can run on, and how.

CUDA binary rules (the ADR's "coverage rule"): a plain or ``f`` cubin ``sm_Xy`` runs on
devices of major X with minor >= y, never across majors; an ``a`` cubin runs on exactly its
own capability; plain PTX ``compute_Xy`` JIT-compiles on every device >= X.y; ``a`` PTX on
its own capability only; ``f`` PTX on its major at minor >= y. Coverage is computed over the
known devices of ``defaults/devices.yml``.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache

from archguard.core.arch import Arch, Targets
from archguard.core.bundled import bundled_yaml

CC = tuple[int, int]


@dataclass(frozen=True)
class Device:
    cc: CC
    name: str

    @property
    def cc_text(self) -> str:
        return f"{self.cc[0]}.{self.cc[1]}"

    def __str__(self) -> str:
        return f"{self.cc_text} ({self.name})"


class Tier(str, enum.Enum):
    NATIVE = "native"
    JIT = "jit-only"
    DEAD = "dead"


@dataclass(frozen=True)
class DeviceCoverage:
    device: Device
    tier: Tier
    via: str | None  # the sm_/compute_ name that serves it


@cache
def known_devices(cuda: tuple[int, int] | None = None) -> tuple[Device, ...]:
    """The known devices under the toolkit ``cuda`` (major, minor): a row with
    ``cuda_below``/``cuda_from`` holds only for those toolkits (Thor is 10.1 before CUDA
    13.0, 11.0 from it). With no toolkit, the newest era's rows."""

    data = bundled_yaml("devices.yml")
    assert isinstance(data, dict)
    devices = []
    for row in data["devices"]:
        below, since = row.get("cuda_below"), row.get("cuda_from")
        if cuda is None:
            if below is not None:
                continue
        elif (below is not None and cuda >= _cc(below)) or (
            since is not None and cuda < _cc(since)
        ):
            continue
        devices.append(Device(_cc(row["cc"]), row["name"]))
    return tuple(sorted(devices, key=lambda d: d.cc))


def _cc(text: str) -> CC:
    major, minor = str(text).split(".")
    return (int(major), int(minor))


def cubin_runs_on(cubin: Arch, cc: CC) -> bool:
    if cubin.major != cc[0]:
        return False
    if cubin.suffix == "a":
        return cubin.cc == cc
    return cc >= cubin.cc


def ptx_runs_on(ptx: Arch, cc: CC) -> bool:
    if ptx.suffix == "a":
        return ptx.cc == cc
    if ptx.suffix == "f":
        return ptx.major == cc[0] and cc >= ptx.cc
    return cc >= ptx.cc


_SPECIFICITY = {"": 0, "f": 1, "a": 2}


def chosen_cubin(cubins: Iterable[Arch], cc: CC) -> Arch | None:
    """The cubin the runtime loads on ``cc``: the highest that runs there."""
    fitting = [c for c in cubins if cubin_runs_on(c, cc)]
    if not fitting:
        return None
    return max(fitting, key=lambda c: (c.cc, _SPECIFICITY[c.suffix]))


def chosen_ptx(ptx: Iterable[Arch], cc: CC) -> Arch | None:
    fitting = [p for p in ptx if ptx_runs_on(p, cc)]
    if not fitting:
        return None
    return max(fitting, key=lambda p: (p.cc, _SPECIFICITY[p.suffix]))


@dataclass(frozen=True)
class Image:
    """One image in a binary: a cubin (``sm_86``) or PTX (``compute_90``)."""

    arch: Arch
    ptx: bool

    @property
    def order(self) -> tuple[int, int, bool, str]:
        """Capability first; at one capability the cubins, then the PTX."""
        return (self.arch.major, self.arch.minor, self.ptx, self.arch.suffix)

    @property
    def name(self) -> str:
        return self.arch.compute if self.ptx else self.arch.sm

    @property
    def label(self) -> str:
        """As a device loads it: ``sm_86``, ``compute_90 (JIT)``."""
        return f"{self.name} (JIT)" if self.ptx else self.name


def loaded_image(cubins: Iterable[Arch], ptx: Iterable[Arch], cc: CC) -> Image | None:
    """The image the runtime loads on ``cc``: its cubin, else the JIT of the highest PTX at
    or below it, else none. The one answer coverage, the lint and the stub check use."""
    cubin = chosen_cubin(cubins, cc)
    if cubin is not None:
        return Image(cubin, False)
    found = chosen_ptx(ptx, cc)
    return None if found is None else Image(found, True)


def runs_on(targets: Targets, cc: CC) -> bool:
    return chosen_cubin(targets.cubins, cc) is not None or chosen_ptx(targets.ptx, cc) is not None


def device_coverage(targets: Targets, device: Device) -> DeviceCoverage:
    image = loaded_image(targets.cubins, targets.ptx, device.cc)
    if image is None:
        return DeviceCoverage(device, Tier.DEAD, None)
    return DeviceCoverage(device, Tier.JIT if image.ptx else Tier.NATIVE, image.name)


def coverage(
    targets: Targets, devices: Sequence[Device] | None = None
) -> tuple[DeviceCoverage, ...]:
    """The tier of every known device for a binary holding ``targets``."""
    return tuple(device_coverage(targets, d) for d in (devices or known_devices()))


def served_devices(
    cubin: Arch, cubins: Iterable[Arch], devices: Sequence[Device] | None = None
) -> tuple[Device, ...]:
    """The known devices in the interval a cubin serves within a list.

    An ``a`` cubin serves its own capability. A plain or ``f`` cubin serves from itself up
    to the next plain/``f`` cubin of the same major in the list (``a`` cubins are points and
    do not end the interval), or to the end of the major.
    """
    devices = devices or known_devices()
    if cubin.suffix == "a":
        return tuple(d for d in devices if d.cc == cubin.cc)
    higher = [
        c.cc for c in cubins if c.major == cubin.major and c.suffix != "a" and c.cc > cubin.cc
    ]
    end = min(higher) if higher else (cubin.major + 1, 0)
    return tuple(d for d in devices if cubin.cc <= d.cc < end)


def describe_devices(devices: Iterable[Device]) -> str:
    """Capabilities only (``7.0, 7.2``): the device names are in ``coverage``."""
    return ", ".join(d.cc_text for d in devices) or "no known device"
