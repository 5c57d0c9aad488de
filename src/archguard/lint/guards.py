"""The ``__CUDA_ARCH__`` stub lint (CW-ADR-0013): guarded code that a served device runs
compiled for a different arch than its own.

For every known device the wheel serves, archguard knows the image it loads: its cubin, else
the JIT of the highest PTX at or below it, compiled with *that* image's ``__CUDA_ARCH__``
(11.0 running ``compute_90`` sees 900). Source gated on ``__CUDA_ARCH__ >= 890`` compiles,
for the ``sm_86`` cubin an 8.9 GPU loads, to its fallback; code gated on
``__CUDA_ARCH_FEAT_SM90_ALL`` (CUTLASS's Hopper paths) compiles to its fallback for a plain
``sm_90`` cubin. The lint reads the sources once per configuration
(:mod:`archguard.lint.preprocessor`)
and reports every guarded region that is active for a device's own native target but
compiled out (or compiled in differently) for the image it loads, with the fix: the arch,
or ``a``/``f`` target, to add. It also reports regions no target in the list compiles
(dead for this wheel), ``#error`` directives a target reaches, and conditions it cannot
evaluate. What each target defines is what nvcc 13.0 defines (checked by
``tests/test_lint.py`` against the real nvcc).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, cast

from archguard.core.arch import Arch, Targets
from archguard.core.coverage import Device, known_devices, loaded_image, runs_on
from archguard.core.kinds import BranchKind
from archguard.core.toolkit import Toolkit
from archguard.lint.expressions import Macro, given_macro
from archguard.lint.outside import OUTSIDE_NAMES, outside_macros
from archguard.lint.preprocessor import Preprocessor, Region, Scan, Walk
from archguard.lint.regions import (
    Use,
    UseIndex,
    classify,
    configuration_only,
    declared_values,
    has_code,
    holds_nothing,
    is_stub,
    kernel_names,
    launches,
)
from archguard.lint.targets import OTHER_COMPILERS, Target

if TYPE_CHECKING:
    from archguard.lint.sources import Sources


# What the image a device loads has in place of a guarded region: what the branch it compiles
# instead holds (a BranchKind: "trap", "empty", "alternative"), "missing-kernel" (host code
# whose device passes instantiate kernels: the image lacks them), or "value" (a constexpr
# value that differs, used at ``Finding.used_at``)
FindingKind = Literal[BranchKind, "missing-kernel", "value"]


@dataclass(frozen=True)
class Finding:
    """A guarded region a served device runs compiled out (or differently)."""

    file: str
    line: int
    guard: str
    device: Device
    image: str  # the image the device loads: "sm_86", "compute_90 (JIT)"
    kind: FindingKind
    torch_runs: bool | None
    fix: Arch  # the target to add so the device gets its own image
    used_at: str = ""  # for a value: where it is used ("file:line")


@dataclass(frozen=True)
class Dead:
    file: str
    line: int
    guard: str
    needs: tuple[str, ...]  # the native targets that would compile it ("8.9", "9.0a")


@dataclass(frozen=True)
class ErrorReached:
    file: str
    line: int
    text: str
    images: tuple[str, ...]


@dataclass
class Report:
    findings: list[Finding] = field(default_factory=list)
    dead: list[Dead] = field(default_factory=list)
    errors: list[ErrorReached] = field(default_factory=list)
    not_understood: list[tuple[str, int, str]] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    not_scanned: list[str] = field(default_factory=list)  # includes outside the scan
    unfinished: list[str] = field(default_factory=list)  # sources the budget left unscanned
    # -D values that are not expressions (-DCUB_NS_PREFIX='namespace cuaev {'): name -> value;
    # each is defined, with a value the lint takes as unknown
    opaque: dict[str, str] = field(default_factory=dict)
    vendored: list[str] = field(default_factory=list)  # a project's vendored .cu, not linted
    seconds: float = 0.0
    files: int = 0
    targets: str = ""

    @property
    def ok(self) -> bool:
        return not self.findings and not self.errors


def _variants(device: Device, toolkit: Toolkit) -> list[Arch]:
    """The device's own native targets, least specific first: plain, f, a."""
    out = []
    for suffix in ("", "f", "a"):
        arch = Arch(device.cc[0], device.cc[1], suffix)
        if toolkit.emits_cubin(arch):
            out.append(arch)
    return out


@dataclass(frozen=True)
class Wheel:
    """What the lint answers for: the wheel's targets, the toolkit compiling them, the torch
    the wheel is for (whether torch runs on a device) and the devices to judge."""

    targets: Targets
    toolkit: Toolkit
    torch_targets: Targets | None = None
    devices: tuple[Device, ...] | None = None


@dataclass
class _Configs:
    """The walk's configurations: each image in the wheel, the host pass, then each served
    device's own native targets; and which image each served device loads."""

    targets: list[Target]
    images: list[int]  # indexes of the wheel's images
    host: int
    # device, image config index, image label, the image's arch when it is the device's own
    served: list[tuple[Device, int, str, Arch | None]] = field(default_factory=list)
    natives: dict[Arch, int] = field(default_factory=dict)


def _configs(wheel: Wheel) -> _Configs:
    targets = wheel.targets
    images = [Target(a.sm, a) for a in sorted(targets.cubins)] + [
        Target(a.compute, a.plain) for a in sorted(targets.ptx)
    ]
    out = _Configs([*images, Target("host", None)], list(range(len(images))), len(images))
    for device in wheel.devices or known_devices():
        image = loaded_image(targets.cubins, targets.ptx, device.cc)
        if image is None:
            continue  # dead: no image to compare
        arch = image.arch.plain if image.ptx else image.arch  # a PTX pass is plain
        index = out.targets.index(Target(image.name, arch))
        own = image.arch if not image.ptx and image.arch.cc == device.cc else None
        out.served.append((device, index, image.label, own))
        for arch in _variants(device, wheel.toolkit):
            if arch not in out.natives:
                out.natives[arch] = len(out.targets)
                out.targets.append(Target(f"native {arch.sm}", arch))
    return out


def _scan(wheel: Wheel, sources: Sources, configs: _Configs) -> tuple[list[dict[str, Macro]], Scan]:
    """Each configuration's initial macro table, and how the walk reads the sources."""
    targets = wheel.targets
    arch_list = ",".join(
        sorted({str(a.major * 100 + a.minor * 10) for a in targets.cubins | targets.ptx}, key=int)
    )
    given = {
        name: given_macro(name, value)
        for name, value in sources.defines.items()
        if value is not None
    }
    toolkit = wheel.toolkit
    tables = [
        {**given, **c.macros(arch_list, toolkit.version, toolkit.build)} for c in configs.targets
    ]
    undefined = frozenset(name for name, value in sources.defines.items() if value is None)
    undefined |= {name for name in OTHER_COMPILERS if name not in sources.defines}
    headers = outside_macros(wheel.toolkit.version)  # outside the scan; what they define is known
    outside = OUTSIDE_NAMES - sources.defines.keys()  # a -D/-U on the command line wins
    opaque = frozenset(name for name, macro in given.items() if macro.opaque)
    scan = Scan(
        sources.read,
        sources.resolve,
        undefined,
        sources.forced,
        sources.budget,
        headers,
        outside,
        opaque=opaque,
    )
    return tables, scan


def analyse(roots: Sequence[str], wheel: Wheel, sources: Sources) -> Report:
    """Lint the translation units ``roots`` for ``wheel``, reading them through
    ``sources``."""
    configs = _configs(wheel)
    tables, scan = _scan(wheel, sources, configs)
    walk = Preprocessor(tables, scan).walk(roots)
    report = Report(targets=str(wheel.targets), files=len(walk.files))
    report.unfinished = list(walk.unfinished)
    report.seconds = walk.seconds
    report.skipped = dict(walk.skipped)
    report.not_scanned = sorted(walk.missing)
    report.opaque = {n: v for n, v in sources.defines.items() if n in scan.opaque and v is not None}
    # judging what the walk found gets a budget of its own, as long as the walk's
    budget = None if sources.budget is None else time.monotonic() + sources.budget
    try:
        _findings(walk, configs, wheel.torch_targets, report, budget)
    except _Spent:
        report.unfinished = list(dict.fromkeys([*report.unfinished, *roots]))
    _errors(walk, configs, report)
    report.not_understood = [(f, n, t) for (f, n), t in sorted(walk.not_understood.items())]
    return report


def _arch_dependent(walk: Walk) -> set[tuple[str, int]]:
    chains = {walk.regions[k].chain for k in walk.arch_chains if k in walk.regions}
    varying = {
        walk.regions[k].chain
        for k, states in walk.states.items()
        if len({s for s in states if s is not False}) > 1 or (True in states and False in states)
    }
    return {k for k, r in walk.regions.items() if r.chain in chains or r.chain in varying}


def _image_branch(reading: _Reading, region: Region, image: int) -> Region | None:
    """The branch of the same #if chain the image compiles, if any."""
    for other in reading.chains[region.chain]:
        if reading.walk.states[(other.file, other.line)][image] is True:
            return other
    return None


_RANK = {"": 0, "f": 1, "a": 2}


def _findings(
    walk: Walk,
    configs: _Configs,
    torch_targets: Targets | None,
    report: Report,
    budget: float | None = None,
) -> None:
    arch_regions = _arch_dependent(walk)
    ordered = sorted(arch_regions, key=lambda k: (k[0], k[1]))
    kernels = {name for lines in walk.lines.values() for name in kernel_names(lines)}
    reading = _Reading(walk, kernels, budget)
    reading.uses = _value_uses(reading, ordered)
    for device, image, label, own in configs.served:
        runs = runs_on(torch_targets, device.cc) if torch_targets is not None else None
        for region, taken, fix in _device_hazards(
            walk, configs, ordered, (device, image, own), reading
        ):
            kind, used_at = _kind(walk, configs, region, taken, reading)
            report.findings.append(
                Finding(
                    region.file, region.line, region.guard, device, label, kind, runs, fix, used_at
                )
            )
    _dead(reading, configs, arch_regions, ordered, report)
    _value_findings(reading, configs, torch_targets, report)


class _Spent(Exception):
    """Judging the walk's regions ran past its budget."""


@dataclass
class _Reading:
    """What the hazards of one walk share: the kernels its files define, the branches of
    each ``#if`` chain, each value region's first use (None: unused), and the time left."""

    walk: Walk
    kernels: set[str]
    budget: float | None = None  # time.monotonic() past which judging stops
    uses: dict[tuple[str, int], Use | None] = field(default_factory=dict)
    chains: dict[tuple[str, int], list[Region]] = field(default_factory=dict)
    _index: UseIndex | None = None
    _skips: dict[tuple[str, int], set[tuple[str, int]]] = field(default_factory=dict)
    _ticks: int = 0

    def __post_init__(self) -> None:
        for region in self.walk.regions.values():
            self.chains.setdefault(region.chain, []).append(region)

    def index(self) -> UseIndex:
        """Where each identifier is used, built on the first question."""
        if self._index is None:
            self._index = UseIndex(self.walk.lines)
        return self._index

    def skip(self, chain: tuple[str, int]) -> set[tuple[str, int]]:
        """The lines of a chain's branches (where a value's uses do not count), once."""
        if chain not in self._skips:
            self._skips[chain] = {
                (r.file, n) for r in self.chains[chain] for n in range(r.line, r.span[1] + 1)
            }
        return self._skips[chain]

    def tick(self) -> None:
        """One more region judged; past the budget, stop."""
        self._ticks += 1
        if self.budget is not None and self._ticks % 256 == 0 and time.monotonic() > self.budget:
            raise _Spent


def _kind(
    walk: Walk, configs: _Configs, region: Region, taken: Region | None, reading: _Reading
) -> tuple[FindingKind, str]:
    """What the device gets instead of ``region``: (kind, where a value is used)."""
    key = (region.file, region.line)
    if walk.states[key][configs.host] is True and launches(region.body, reading.kernels):
        return "missing-kernel", ""
    if key in reading.uses:
        use = reading.uses[key]
        return "value", f"{use.file}:{use.line}" if use is not None else ""
    if taken is None:
        return "empty", ""
    return cast("FindingKind", classify(taken.body)), ""  # a BranchKind


def _value_uses(
    reading: _Reading, regions: Iterable[tuple[str, int]]
) -> dict[tuple[str, int], Use | None]:
    """For each region that only declares constexpr values: where the value is first used
    outside the declaring chain (None: nowhere in the scanned files)."""
    out: dict[tuple[str, int], Use | None] = {}
    for key in regions:
        reading.tick()
        region = reading.walk.regions[key]
        names = declared_values(region.body)
        if names is not None:
            out[key] = reading.index().first_use(names, reading.skip(region.chain))
    return out


def _device_hazards(
    walk: Walk,
    configs: _Configs,
    ordered: list[tuple[str, int]],
    served: tuple[Device, int, Arch | None],
    reading: _Reading,
) -> Iterator[tuple[Region, Region | None, Arch]]:
    """The regions a device's own native target compiles and the image it loads does not:
    (region, the branch the image takes instead, the target that fixes it)."""
    image = served[1]
    natives = configs.natives
    variants = _compared(configs, served)
    reported: set[tuple[str, int]] = set()
    for key in ordered:
        reading.tick()
        region = walk.regions[key]
        states = walk.states[key]
        if states[image] is not False:
            continue
        active = [a for a in variants if states[natives[a]] is True]
        if not active or _ancestor_reported(walk, region, reported):
            continue
        taken = _image_branch(reading, region, image)
        if configuration_only(region.body) and (taken is None or not has_code(taken.body)):
            # CUTLASS's `#if defined(__CUDA_ARCH_SPECIFIC__)` / `#define ...`: no code of
            # its own; the hazard is where the macro is used, reported there
            continue
        if holds_nothing(region.body) or reading.uses.get(key, False) is None:
            # only an #error (reported as reached), or a value nothing scanned uses
            continue
        if is_stub(region.body) and not launches(region.body, reading.kernels):
            continue  # the device's own compile has a trap or nothing here: nothing lost
        reported.add(key)
        yield region, taken, active[0]


def _compared(configs: _Configs, served: tuple[Device, int, Arch | None]) -> list[Arch]:
    """The device's own targets its loaded image is compared with. A device that loads its
    own compile: only its more specific targets (plain sm_90 with sm_90a); one that loads a
    lower plain image: all of them; one that loads a lower family cubin (10.3 on sm_100f):
    its own f and a targets (its plain compile is less than what it loads)."""
    device, image, own = served
    loaded = configs.targets[image].arch
    lowest = _RANK[loaded.suffix] if loaded is not None else 0
    floor = _RANK[own.suffix] if own is not None else lowest - 1
    return [a for a in configs.natives if a.cc == device.cc and _RANK[a.suffix] > floor]


def _value_findings(
    reading: _Reading, configs: _Configs, torch_targets: Targets | None, report: Report
) -> None:
    """constexpr values computed from an arch macro (``kFAST = (__CUDA_ARCH__ / 100) >= 10``)
    that differ between the image a device loads and its own compile, where something
    scanned uses them."""
    walk = reading.walk
    for (file, line), value in sorted(walk.values.items()):
        reading.tick()
        use: Use | bool | None = False  # looked up once, when first needed
        for device, image, label, own in configs.served:
            loaded = value.values[image]
            differs = [
                a
                for a in _compared(configs, (device, image, own))
                if value.values[configs.natives[a]] is not None
                and loaded is not None
                and value.values[configs.natives[a]] != loaded
            ]
            if not differs:
                continue
            if use is False:
                use = reading.index().first_use({value.name}, {(file, line)})
            if not isinstance(use, Use):
                break  # nothing scanned uses it
            runs = runs_on(torch_targets, device.cc) if torch_targets is not None else None
            report.findings.append(
                Finding(
                    file,
                    line,
                    value.text,
                    device,
                    label,
                    "value",
                    runs,
                    differs[0],
                    f"{use.file}:{use.line}",
                )
            )


def _dead(
    reading: _Reading,
    configs: _Configs,
    arch_regions: set[tuple[str, int]],
    ordered: list[tuple[str, int]],
    report: Report,
) -> None:
    """Arch guards no image in the wheel (nor the host pass) compiles."""
    walk = reading.walk
    needs_by_region: dict[tuple[str, int], list[str]] = {}
    for arch, index in configs.natives.items():
        for key in arch_regions:
            if walk.states[key][index] is True:
                needs_by_region.setdefault(key, []).append(str(arch))
    dead: set[tuple[str, int]] = set()
    for key in ordered:
        reading.tick()
        states = walk.states[key]
        region = walk.regions[key]
        if key not in walk.arch_chains and not region.guard.startswith("#else"):
            continue  # `#elif defined(RDNA3)` in an arch chain: not an arch guard itself
        if any(states[i] is not False for i in [*configs.images, configs.host]):
            continue
        dead.add(key)  # a dead region's own dead regions are not named again, at any depth
        if region.parent is not None and region.parent in dead:
            continue
        report.dead.append(
            Dead(region.file, region.line, region.guard, tuple(needs_by_region.get(key, ())))
        )


def _ancestor_reported(walk: Walk, region: Region, reported: set[tuple[str, int]]) -> bool:
    parent = region.parent
    seen = 0
    while parent is not None and seen < 256:
        if parent in reported:
            return True
        up = walk.regions.get(parent)
        parent = up.parent if up else None
        seen += 1
    return False


def _errors(walk: Walk, configs: _Configs, report: Report) -> None:
    for file, line, text, states in walk.errors:
        hit = tuple(configs.targets[i].name for i in configs.images if states[i] is True)
        if hit:
            report.errors.append(ErrorReached(file, line, text, hit))
