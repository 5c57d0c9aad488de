"""Stub kernels in a built binary: a kernel that is real in one image and an empty or
trapping stub in the image some served device loads (``verify --stubs``).

This is what no reading of the source can see: guards inside third-party headers,
``if constexpr`` on the arch, ``NV_IF_TARGET``, templates. The binary cannot say where a
guard's threshold lies between two images, so a device that runs a stub compiled for a
lower arch, where a higher image of the same kernel is real, is a (possible) finding; the
source lint (``archguard lint``) names the guard. Pure: the kernels come from
:mod:`archguard.detect.sass`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from archguard.core.arch import Arch
from archguard.core.coverage import Device, Image, known_devices, loaded_image
from archguard.core.kinds import REAL, StubKind


@dataclass(frozen=True)
class Kernel:
    name: str  # demangled
    kinds: tuple[tuple[str, StubKind], ...]  # (image name, kind), images ascending

    @property
    def stub_everywhere(self) -> bool:
        return all(kind != REAL for _, kind in self.kinds)

    @property
    def mixed(self) -> bool:
        return not self.stub_everywhere and any(kind != REAL for _, kind in self.kinds)

    def summary(self) -> str:
        by_kind: dict[StubKind, list[str]] = {}
        for image, kind in self.kinds:
            by_kind.setdefault(kind, []).append(image)
        return "; ".join(
            f"{kind} in {' '.join(images)}" for kind, images in sorted(by_kind.items())
        )


@dataclass(frozen=True)
class StubFinding:
    kernel: str
    device: Device
    image: str  # the image it loads
    kind: StubKind  # what the kernel is there: empty or trap
    real_in: tuple[str, ...]  # the images where it is real
    fix: Arch  # a cubin of the device's own


@dataclass(frozen=True)
class StubReport:
    kernels: tuple[Kernel, ...]
    findings: tuple[StubFinding, ...]


def _order(image: Image) -> tuple[int, int, bool, str]:
    return image.order


def analyse(
    kernels: Mapping[Image, Mapping[str, StubKind]],
    names: Mapping[str, str] | None = None,
    devices: Sequence[Device] | None = None,
) -> StubReport:
    """``kernels``: {image: {mangled name: kind}} for one binary."""
    names = names or {}
    devices = tuple(devices or known_devices())
    cubins = {image.arch for image in kernels if not image.ptx}
    ptxs = {image.arch for image in kernels if image.ptx}
    all_names = sorted({k for per in kernels.values() for k in per})
    table: dict[str, dict[Image, StubKind]] = {k: {} for k in all_names}
    for image, per in kernels.items():
        for k, what in per.items():
            table[k][image] = what
    views = tuple(
        Kernel(names.get(k, k), tuple((i.name, table[k][i]) for i in sorted(table[k], key=_order)))
        for k in all_names
    )
    findings: list[StubFinding] = []
    for device in devices:
        loaded = loaded_image(cubins, ptxs, device.cc)
        if loaded is None or (not loaded.ptx and loaded.arch.cc == device.cc):
            continue  # nothing loads, or its own compile: a stub there is what the source says
        for k in all_names:
            kind = table[k].get(loaded)
            if kind is None or kind == REAL:
                continue
            higher = tuple(
                i.name
                for i in sorted(table[k], key=_order)
                if table[k][i] == REAL and i.arch.cc > loaded.arch.cc
            )
            if higher:
                findings.append(
                    StubFinding(
                        names.get(k, k),
                        device,
                        loaded.label,
                        kind,
                        higher,
                        Arch(device.cc[0], device.cc[1]),
                    )
                )
    return StubReport(views, tuple(findings))


def lines(report: StubReport) -> list[str]:
    """The ``stubs`` part of ``verify``'s text for one binary."""
    out = []
    shown = [k for k in report.kernels if k.mixed or k.stub_everywhere]
    for view in shown:
        what = "a stub in every image" if view.stub_everywhere else view.summary()
        out.append(f"  stub       {view.name}: {what}")
    grouped: dict[tuple[str, str, StubKind, tuple[str, ...]], list[StubFinding]] = {}
    for f in report.findings:
        grouped.setdefault((f.kernel, f.image, f.kind, f.real_in), []).append(f)
    for (kernel, image, kind, real_in), items in grouped.items():
        devices = ", ".join(f.device.cc_text for f in items)
        fixes = " or ".join(str(f.fix) for f in items)
        out.append(
            f"  STUB RUN   {kernel} is {kind} in {image}, which {devices} "
            f"load{'s' if len(items) == 1 else ''} (it is real in {' '.join(real_in)}): "
            f"a device that should run it needs its own cubin (add {fixes}; `archguard lint` "
            "names the guard)"
        )
    if not shown:
        out.append(f"  stubs      none ({len(report.kernels)} kernels, real in every image)")
    return out
