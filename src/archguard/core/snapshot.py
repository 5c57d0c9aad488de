"""Keeping the torch facts true: a probed torch against the bundled table, the row to paste,
and the ``arch_exceptions`` the policy needs for it (CW-ADR-0012's "snapshot refreshed by
the P.A.M workflow"; the ADR's "Volta flicker" is caught here).

Pure: the probe itself (cuobjdump on the wheel's libraries) is
:mod:`archguard.detect.torchlibs`; this module compares what it found.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace

from packaging.version import Version

from archguard.core.arch import Targets
from archguard.core.coverage import Device, known_devices
from archguard.core.cuda import CudaVersion
from archguard.core.derive import ProposedException, implied_exceptions
from archguard.core.formats import Format
from archguard.core.platform import DEFAULT_PLATFORM, Platform
from archguard.core.policy import ArchException, Policy
from archguard.core.torchbuild import BundledBuild, TorchBuild


@dataclass(frozen=True)
class Probed:
    """One torch build as its binaries show it (from :mod:`archguard.detect.torchlibs`)."""

    version: str  # 2.13.0+cu130
    cuda: CudaVersion
    targets: Targets
    provenance: str
    extras: tuple[str, ...] = ()  # "libtorch_cuda.so: sm_103 (59 of 449)", ...
    platform: Platform = DEFAULT_PLATFORM  # the wheel's tag, or its libraries' ELF machine

    @property
    def release(self) -> str:
        return ".".join(self.version.split("+")[0].split(".")[:2])

    @property
    def label(self) -> str:
        """``torch 2.13 (cu130)``, ``torch 2.13 (cu130, aarch64)``."""
        on = "" if self.platform == DEFAULT_PLATFORM else f", {self.platform}"
        return f"torch {self.release} ({self.cuda.tag}{on})"

    def build(self) -> TorchBuild:
        return TorchBuild(
            Version(self.release), self.cuda, self.targets, self.provenance, self.platform
        )


def row_text(probed: Probed) -> str:
    """The torch_builds.yml row for this torch, with its provenance (and the extras some
    kernels carry, as comments)."""
    cubins = " ".join(str(a) for a in sorted(probed.targets.cubins))
    ptx = " ".join(str(a) for a in sorted(probed.targets.ptx))
    lines = [f"  # not torch's arch list: {e}" for e in probed.extras]
    lines += [
        f"  - tag: {probed.cuda.tag}",
        f"    platform: {probed.platform}",
        f'    torch: ["{probed.release}"]',
        f'    cubins: "{cubins}"',
        f'    ptx: "{ptx}"',
        "    source: >-",
        f"      probe: {probed.provenance}, its CUDA libraries read with cuobjdump",
    ]
    return "\n".join(lines) + "\n"


def differences(
    probed: Probed, builds: Sequence[BundledBuild], platform: Platform | None = None
) -> list[str]:
    """How the table's row for this (index, release, platform) differs from the binaries;
    [] if not. ``platform``: compare with another platform's row (default: the torch's own)."""
    on = probed.platform if platform is None else platform
    mine = [b for b in builds if b.cuda == probed.cuda and b.platform == on]
    cell = next((b for b in mine if b.torch == probed.release), None)
    label = replace(probed, platform=on).label  # the row compared: its index and machine
    if cell is None:
        known = ", ".join(b.torch for b in mine) or "none"
        return [
            f"the table has no {on} row for torch {probed.release} ({probed.cuda.tag}) (its "
            f"{probed.cuda.tag} {on} releases: {known}); add the row printed above"
        ]
    table = cell.build.targets
    out = []
    for arch in sorted(table.cubins - probed.targets.cubins):
        out.append(f"{arch.sm}: the table says {label} ships it; its binaries do not")
    for arch in sorted(probed.targets.cubins - table.cubins):
        out.append(f"{arch.sm}: {label} ships it; the table does not say so")
    for arch in sorted(table.ptx - probed.targets.ptx):
        out.append(f"{arch.compute}: the table says {label} ships it; its binaries do not")
    for arch in sorted(probed.targets.ptx - table.ptx):
        out.append(f"{arch.compute}: {label} ships it; the table does not say so")
    return out


@dataclass(frozen=True)
class ExceptionCheck:
    needed: tuple[ProposedException, ...]  # implied by this torch, for the policy's row
    recorded: tuple[ArchException, ...]  # what the policy records for this torch
    missing: tuple[ProposedException, ...]  # needed, not recorded: add them
    stale: tuple[ArchException, ...]  # recorded, not needed: arch_exceptions is stale


def exceptions_for(
    probed: Probed, policy: Policy, devices: Sequence[Device] | None = None
) -> ExceptionCheck | None:
    """The arch_exceptions entries the policy needs for this torch (None: no policy row),
    against the row's list for the torch's platform."""
    row = policy.row(probed.cuda.tag, probed.platform)
    if row is None:
        return None
    cell = BundledBuild(probed.cuda, probed.release, probed.build())
    cubins = frozenset(e.arch for e in row.entries)
    needed = implied_exceptions(probed.cuda, cubins, [cell], tuple(devices or known_devices()))
    version = Version(probed.release)
    recorded = tuple(e for e in policy.exceptions_for(probed.cuda.tag) if e.applies_to(version))
    recorded_drops = {a for e in recorded for a in e.drop}
    needed_drops = {e.drop for e in needed}
    return ExceptionCheck(
        needed,
        recorded,
        tuple(e for e in needed if e.drop not in recorded_drops),
        tuple(e for e in recorded if not set(e.drop) & needed_drops),
    )


def exception_yaml(tag: str, entries: Sequence[ProposedException]) -> str:
    lines = [f"  {tag}:"]
    for e in entries:
        lines += [
            f'    - torch: "{e.torch}"',
            f'      drop: "{e.drop}"',
            "      reason: >-",
            f"        {e.reason}",
        ]
    return "\n".join(lines) + "\n"


PROBE_SCHEMA = "archguard.probe-torch/1"


def render(  # noqa: PLR0913 - what was probed, what it is checked against, and how
    probes: Sequence[Probed],
    builds: Sequence[BundledBuild],
    policy: Policy,
    fmt: Format = "text",
    check: bool = False,
    *,
    platform: Platform | None = None,
) -> tuple[str, bool]:
    """``archguard probe-torch``: each torch's row; with ``check``, how the table differs and
    which arch_exceptions the policy needs. Returns (text, True when nothing differs).
    ``platform``: compare with that platform's rows (default: each torch's own)."""
    ok = True
    results = []
    for probed in probes:
        diff = differences(probed, builds, platform)
        exc = exceptions_for(probed, policy)
        ok = ok and not diff and (exc is None or not (exc.missing or exc.stale))
        results.append((probed, diff, exc))
    if fmt == "json":
        data = {
            "schema": PROBE_SCHEMA,
            "ok": ok,
            "torches": [
                {
                    "version": p.version,
                    "tag": p.cuda.tag,
                    "platform": p.platform,
                    "release": p.release,
                    "cubins": [str(a) for a in sorted(p.targets.cubins)],
                    "ptx": [str(a) for a in sorted(p.targets.ptx)],
                    "provenance": p.provenance,
                    "extras": list(p.extras),
                    "differences": diff,
                    "exceptions_needed": [
                        {"torch": e.torch, "drop": str(e.drop), "reason": e.reason}
                        for e in (exc.missing if exc else ())
                    ],
                    "exceptions_stale": [str(e.torch) for e in (exc.stale if exc else ())],
                }
                for p, diff, exc in results
            ],
        }
        return json.dumps(data, indent=2) + "\n", ok
    out: list[str] = []
    for probed, diff, exc in results:
        out += [f"# torch {probed.version}: {probed.provenance}", row_text(probed).rstrip()]
        if not check:
            out.append("")
            continue
        out.append(f"# against the table: {'the same' if not diff else 'DIFFERENT'}")
        out += [f"#   - {d}" for d in diff]
        if exc is None:
            out.append(f"# arch_exceptions: the policy has no {probed.cuda.tag} row")
        else:
            for e in exc.missing:
                out.append(
                    f"# arch_exceptions: the policy needs this entry (torch {probed.release} "
                    f"cannot run where {e.drop.sm} serves):"
                )
                out += [f"#   {line}" for line in exception_yaml(probed.cuda.tag, [e]).splitlines()]
            for stale in exc.stale:
                out.append(
                    f"# arch_exceptions[{probed.cuda.tag}] torch {stale.torch} drops "
                    f"{' '.join(str(a) for a in stale.drop)}, which torch {probed.release} "
                    "can run: that exception is stale for this release"
                )
            if not exc.missing and not exc.stale:
                out.append(
                    f"# arch_exceptions: what the policy records for torch {probed.release} "
                    f"({len(exc.recorded)} entr{'y' if len(exc.recorded) == 1 else 'ies'}) "
                    "is what its binaries imply"
                )
        out.append("")
    if check:
        out.append(f"result: {'OK' if ok else 'DIFFERENT'}")
    return "\n".join(out).rstrip() + "\n", ok
