"""The ADR's derivation rule, as a function: propose a policy row for a CUDA index.

CW-ADR-0012: "start from PyTorch's union, drop arches with no meaningful population for
this farm's audience, never add a SASS arch PyTorch's torch cannot execute, and re-add PTX
per major family" (PTX on the highest arch, and the net for every major gap). "A new CUDA
index gets its row by running the same derivation against the refreshed snapshot - a
reviewed PR, not an automatic commit." This module proposes; it never writes a policy.

Inputs are data: the torch facts for the index (PyTorch's builds: bundled
``torch_builds.yml`` or a farm's), the toolkit facts (``toolkits.yml``), and the owner's
decisions the rule needs (the policy's ``derivation:`` section: decided drops with their
reasons, and where the net for a major gap sits). Pure: no torch, no process.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from packaging.version import Version

from archguard.core.arch import Arch, ArchEntry, format_list
from archguard.core.coverage import Device, describe_devices, known_devices, runs_on, served_devices
from archguard.core.cuda import CudaVersion
from archguard.core.decisions import torch_gap
from archguard.core.formats import Format
from archguard.core.platform import DEFAULT_PLATFORM, Platform
from archguard.core.policy import Policy
from archguard.core.toolkit import Toolkit
from archguard.core.torchbuild import BundledBuild
from archguard.errors import UnknownTorchBuild

# The derivation's steps, in order: PyTorch's union, the policy's decided drops, what the
# toolkit cannot emit, the torch clamp (recorded as exceptions), the PTX nets.
DeriveStep = Literal["start", "drop", "toolkit", "torch", "ptx"]
_DROPPING: tuple[DeriveStep, ...] = ("drop", "toolkit")  # the steps that take an arch out


@dataclass(frozen=True)
class ProposedException:
    """An ``arch_exceptions`` entry the torch facts imply."""

    torch: str  # a version specifier: "==2.7.*" or ">=2.11"
    drop: Arch
    releases: tuple[str, ...]  # the releases of the index it matches
    reason: str


@dataclass(frozen=True)
class Derived:
    cuda: CudaVersion
    releases: tuple[str, ...]
    union_cubins: frozenset[Arch]
    union_ptx: frozenset[Arch]
    entries: tuple[ArchEntry, ...]
    steps: tuple[tuple[DeriveStep, str], ...]  # (step, what it did and why)
    reason: str  # the proposed row's reason, in the policy's style
    exceptions: tuple[ProposedException, ...]
    differences: tuple[str, ...] = field(default=())  # against the policy's row, with why
    existing: str | None = None  # the policy's row, if it has one
    platform: Platform = DEFAULT_PLATFORM  # whose torch facts: a row's list for that machine

    @property
    def index(self) -> str:
        """``cu130``, or ``cu130 aarch64`` for another platform's facts, in words."""
        return self.cuda.tag + ("" if self.platform == DEFAULT_PLATFORM else f" {self.platform}")

    @property
    def text(self) -> str:
        return format_list(self.entries)


def _names(arches: Sequence[Arch] | frozenset[Arch]) -> str:
    return " ".join(str(a) for a in sorted(arches)) or "none"


def _specs(hit: list[str], all_releases: list[str]) -> list[tuple[str, list[str]]]:
    """Specifiers for the releases in ``hit``: ``>=first`` for a run of two or more that
    reaches the newest release (later releases will likely keep the drop), else one
    ``==X.Y.*`` per release."""
    ordered = sorted(all_releases, key=Version)
    tail: list[str] = []
    for release in reversed(ordered):
        if release not in hit:
            break
        tail.insert(0, release)
    out = [(f"=={r}.*", [r]) for r in hit if len(tail) < 2 or r not in tail]
    if len(tail) >= 2:
        out.append((f">={tail[0]}", tail))
    return out


def _cells(
    builds: Sequence[BundledBuild], cuda: CudaVersion, platform: Platform = DEFAULT_PLATFORM
) -> list[BundledBuild]:
    cells = sorted(
        (b for b in builds if b.cuda == cuda and b.platform == platform),
        key=lambda b: Version(b.torch),
    )
    if not cells:
        known = ", ".join(sorted({b.tag for b in builds if b.platform == platform})) or "none"
        raise UnknownTorchBuild(
            f"there are no {platform} torch facts for {cuda.tag} (the torch table knows "
            f"{known} for {platform}). "
            "Derive needs PyTorch's builds for the index: add them to a torch_builds.yml "
            "(`python -m archguard probe-torch WHEEL` prints each row) and pass it with "
            f"--torch-builds. Until PyTorch publishes a {cuda.tag} index no build needs its "
            f"row: a build with nvcc {cuda.text} takes its torch build's row, clamped by nvcc "
            f"{cuda.text}'s facts (the row rule, docs/policy.md); `archguard derive` with no "
            "--cuda derives that row on a machine with the nvcc and torch installed."
        )
    return cells


def implied_exceptions(
    cuda: CudaVersion,
    cubins: frozenset[Arch],
    cells: Sequence[BundledBuild],
    devices: Sequence[Device],
) -> tuple[ProposedException, ...]:
    """The torch clamp of a row, release by release: every cubin whose served interval holds
    no device a release of torch runs on needs a recorded exception for that release."""
    dead: dict[Arch, list[str]] = {}
    why: dict[tuple[Arch, str], str] = {}
    for cell in cells:
        for arch in sorted(cubins):
            served = served_devices(arch, cubins, devices)
            if served and not any(runs_on(cell.build.targets, d.cc) for d in served):
                dead.setdefault(arch, []).append(cell.torch)
                why[(arch, cell.torch)] = torch_gap(cell.build, arch, served)
    releases = [c.torch for c in cells]
    out = []
    for arch, hit in sorted(dead.items()):
        serves = describe_devices(served_devices(arch, cubins, devices))
        for spec, matched in _specs(hit, releases):
            builds = "builds" if len(matched) > 1 else "build"
            out.append(
                ProposedException(
                    spec,
                    arch,
                    tuple(matched),
                    f"derived: PyTorch's {cuda.tag} {builds} of torch {', '.join(matched)} "
                    f"cannot run where {arch.sm} would serve ({serves}): "
                    f"{why[(arch, matched[0])]}.",
                )
            )
    return tuple(sorted(out, key=lambda e: (Version(e.releases[0]), e.drop)))


def _ptx_nets(
    row: frozenset[Arch], policy: Policy, toolkit: Toolkit, devices: Sequence[Device]
) -> dict[Arch, str]:
    """The ADR's PTX: on the row's highest arch (real codegen for future majors above it),
    and a net for each major between the row's lowest and highest that has devices and no
    cubin (the policy's decided carrier, else the highest arch below the gap); each with
    why."""
    ptx: dict[Arch, str] = {}
    if not row:
        return ptx
    highest = max(row)
    ptx[highest] = f"{highest}+PTX on the highest arch: real codegen for future majors above it"
    majors = {a.major for a in row}
    for major in range(min(majors) + 1, max(majors)):
        gap_devices = [d for d in devices if d.cc[0] == major]
        if major in majors or not gap_devices:
            continue
        below = sorted(a for a in row if a.major < major and toolkit.emits_ptx(a.plain))
        decided = policy.derivation.gap_net(major)
        if decided is not None and decided.arch in below:
            carrier, why = decided.arch, f"decided in the policy: {decided.reason}"
        elif below:
            carrier, why = below[-1], "the highest arch below the gap (the ADR's rule)"
        else:
            continue
        names = describe_devices(gap_devices)
        ptx[carrier] = (
            f"{carrier}+PTX: the net for the {major}.x gap ({names}, no cubin in the row), {why}"
        )
    return ptx


def derive(  # noqa: PLR0913 - the rule's facts and decisions, and whose machine
    cuda: CudaVersion,
    policy: Policy,
    toolkit: Toolkit,
    builds: Sequence[BundledBuild],
    devices: Sequence[Device] | None = None,
    *,
    platform: Platform = DEFAULT_PLATFORM,
) -> Derived:
    """Apply the ADR's rule to the facts for ``cuda`` on ``platform``; compare with the
    policy's row (its list for that platform, where it has one)."""
    devices = tuple(devices or known_devices())
    cells = _cells(builds, cuda, platform)
    index = cuda.tag + ("" if platform == DEFAULT_PLATFORM else f" {platform}")
    union = frozenset(a for c in cells for a in c.build.targets.cubins if a.suffix != "a")
    union_ptx = frozenset(a for c in cells for a in c.build.targets.ptx)
    releases = tuple(c.torch for c in cells)
    steps: list[tuple[DeriveStep, str]] = [
        (
            "start",
            f"PyTorch's {index} union over torch {', '.join(releases)}: SASS "
            f"{_names(union)}; PTX {_names(union_ptx)}",
        )
    ]
    row = set(union)
    dropped_text: list[str] = []
    for drop in policy.derivation.drops:
        if drop.arch in row:
            row.discard(drop.arch)
            steps.append(("drop", f"{drop.arch}: decided in the policy: {drop.reason}"))
            dropped_text.append(f"{drop.arch} ({drop.reason})")
    for arch in sorted(row):
        if not toolkit.emits_cubin(arch):
            row.discard(arch)
            steps.append(("toolkit", f"{arch}: nvcc {toolkit.text} cannot emit {arch.sm}"))
            dropped_text.append(f"{arch} (nvcc {toolkit.text} cannot emit it)")
    steps.append(
        (
            "torch",
            "no SASS arch is added: every arch comes from a torch build of this index, and "
            "the torch clamp of each release is recorded as arch_exceptions below",
        )
    )
    ptx = _ptx_nets(frozenset(row), policy, toolkit, devices)
    steps += [("ptx", why) for _, why in sorted(ptx.items())]
    entries = tuple(sorted(ArchEntry(a, a in ptx) for a in row))
    nets = [f"{a}+PTX" for a in sorted(ptx)]
    reason = (
        f"derived by CW-ADR-0012's rule from PyTorch's {index} union ({_names(union)}, "
        f"torch {releases[0]}-{releases[-1]})"
        + (f" minus {'; '.join(dropped_text)}" if dropped_text else "")
        + f"; PTX per major family: {', '.join(nets)}"
        + "."
    )
    exceptions = implied_exceptions(cuda, frozenset(row), cells, devices)
    return _compare(
        Derived(
            cuda,
            releases,
            union,
            union_ptx,
            entries,
            tuple(steps),
            reason,
            exceptions,
            platform=platform,
        ),
        policy,
        cells,
    )


def _compare(derived: Derived, policy: Policy, cells: Sequence[BundledBuild]) -> Derived:
    """Where the policy already has the row: the difference, arch by arch, and why."""
    tag = derived.cuda.tag
    existing = policy.row(tag, derived.platform)
    if existing is None:
        return derived
    out: list[str] = []
    mine = {e.arch: e.ptx for e in derived.entries}
    theirs = {e.arch: e.ptx for e in existing.entries}
    for arch in sorted(set(mine) | set(theirs)):
        if arch not in theirs:
            out.append(f"{arch}: derived, not in the policy row ({_why_in(derived, arch)})")
        elif arch not in mine:
            out.append(f"{arch}: in the policy row, not derived ({_why_out(derived, arch)})")
        elif mine[arch] != theirs[arch]:
            has = "derived" if mine[arch] else "the policy row"
            out.append(f"{arch}: +PTX differs ({has} carries it)")
    recorded = {
        (cell.torch, arch)
        for exc in policy.exceptions_for(tag)
        for cell in cells
        if exc.applies_to(Version(cell.torch))
        for arch in exc.drop
    }
    implied = {(r, e.drop) for e in derived.exceptions for r in e.releases}
    for release, arch in sorted(implied - recorded, key=lambda x: (Version(x[0]), x[1])):
        out.append(f"arch_exceptions[{tag}]: torch {release} needs {arch} dropped, not recorded")
    for release, arch in sorted(recorded - implied, key=lambda x: (Version(x[0]), x[1])):
        out.append(
            f"arch_exceptions[{tag}]: records {arch} dropped for torch {release}, which the "
            "torch facts do not imply"
        )
    return replace(derived, differences=tuple(out), existing=format_list(existing.entries))


def _why_in(derived: Derived, arch: Arch) -> str:
    return f"PyTorch's {derived.index} union has {arch}"


def _why_out(derived: Derived, arch: Arch) -> str:
    for step, text in derived.steps:
        if step in _DROPPING and text.startswith(f"{arch}:"):
            return text
    return f"PyTorch's {derived.index} union ({_names(derived.union_cubins)}) does not have it"


DERIVE_SCHEMA = "archguard.derive/1"


def render(
    derived: Derived,
    policy_source: str,
    fmt: Format = "text",
    inputs: Sequence[tuple[str, str]] = (),
) -> str:
    """``archguard derive``: the proposed row and exceptions, with the steps and the
    difference from the policy's row. A proposal for a reviewed PR: nothing is written.
    ``inputs``: where the toolkit's facts and the row came from, when they were detected."""
    tag = derived.cuda.tag
    if fmt == "json":
        data = {
            "schema": DERIVE_SCHEMA,
            "cuda": derived.cuda.text,
            "tag": tag,
            "platform": derived.platform,
            "torch_releases": list(derived.releases),
            "union": {
                "cubins": [str(a) for a in sorted(derived.union_cubins)],
                "ptx": [str(a) for a in sorted(derived.union_ptx)],
            },
            "steps": [{"step": s, "what": w} for s, w in derived.steps],
            "row": {"arch_list": derived.text, "reason": derived.reason},
            "arch_exceptions": [
                {
                    "torch": e.torch,
                    "drop": str(e.drop),
                    "reason": e.reason,
                    "releases": list(e.releases),
                }
                for e in derived.exceptions
            ],
            "policy": {"source": policy_source, "row": derived.existing},
            "differences": list(derived.differences),
            "agrees": derived.existing is not None and not derived.differences,
            "inputs": dict(inputs),
        }
        return json.dumps(data, indent=2) + "\n"
    out = [
        f"archguard derive: {tag} (CUDA {derived.cuda.text}) for {derived.platform}, by "
        "CW-ADR-0012's rule",
        "",
    ]
    out += [f"  {key:<8} {value}" for key, value in inputs] + ([""] if inputs else [])
    out += [f"  {step:<8} {what}" for step, what in derived.steps]
    out += ["", "Proposed row (for a reviewed PR; nothing is written):", "rows:", f"  {tag}:"]
    pad = "    "
    if derived.platform != DEFAULT_PLATFORM:
        out += ["    platforms:", f"      {derived.platform}:"]
        pad = "        "
    out += [f'{pad}arch_list: "{derived.text}"', f"{pad}reason: >-", f"{pad}  {derived.reason}"]
    if derived.exceptions:
        out += ["arch_exceptions:", f"  {tag}:"]
        for e in derived.exceptions:
            out += [
                f'    - torch: "{e.torch}"',
                f'      drop: "{e.drop}"',
                "      reason: >-",
                f"        {e.reason}",
            ]
    else:
        out += [f"(no arch_exceptions: every torch release of {tag} runs every cubin's devices)"]
    out += ["", f"Against the policy ({policy_source}):"]
    name = tag if derived.platform == DEFAULT_PLATFORM else f"{tag} as {derived.platform} reads it"
    if derived.existing is None:
        out.append(f"  no {tag} row yet: the row above is new; review its reason and add it")
    elif not derived.differences:
        out.append(f"  row {name} ({derived.existing}) and its arch_exceptions: the same")
    else:
        out.append(f"  row {name} is {derived.existing}; differences:")
        out += [f"  - {d}" for d in derived.differences]
    return "\n".join(out) + "\n"
