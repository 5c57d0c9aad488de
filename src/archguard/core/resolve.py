"""Resolution: from the policy, the toolkit, the torch and the package to one arch list.

Pure: no torch import, no process, no environment lookup. Every step records, per arch, a
:class:`Decision` (step, outcome, reason); ``explain``, the build log and the wheel's
record all print from those records. The steps (SPEC §4):

1. request   the package's ``arch_list_by_cuda[cuXYZ]``, else its ``arch_list``, else the
             policy row ``cuXYZ`` (``ARCHGUARD_ARCH_LIST`` beats all), where ``cuXYZ`` is
             chosen by :func:`choose_row`: the torch build's CUDA index, the toolkit's facts
             doing the clamp; no row is an error, never a fall-back to a neighbouring row;
2. exception drop what ``arch_exceptions[cuXYZ]`` records for this torch;
3. toolkit   drop what this nvcc cannot emit;
4. torch     drop every cubin whose served interval holds no device this torch runs on;
5. ptx       keep declared ``+PTX``, move orphaned ones down, and fill the two PTX roles;
6. empty     no cubin left is an :class:`~archguard.errors.EmptyArchList`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from archguard.core.arch import Arch, ArchEntry, Targets, format_list
from archguard.core.coverage import (
    Device,
    DeviceCoverage,
    chosen_cubin,
    coverage,
    known_devices,
)
from archguard.core.cuda import CudaVersion
from archguard.core.decisions import (
    Decision,
    Judged,
    Outcome,
    Step,
    TorchClamp,
    applicable_exceptions,
    exception_reason,
    toolkit_decision,
)
from archguard.core.platform import DEFAULT_PLATFORM, Platform
from archguard.core.policy import ArchException, Policy
from archguard.core.rows import RowChoice, choose_row
from archguard.core.toolkit import Toolkit
from archguard.core.torchbuild import TorchBuild
from archguard.errors import EmptyArchList, NoPolicyRow


class PackageRequest(Protocol):
    """What the resolution asks of a package's table (``settings.model.PackageConfig`` is
    one): the list it asks for under a CUDA tag, and where that came from. The core imports
    nothing above it: the table is passed in."""

    def requested_for(self, tag: str) -> tuple[tuple[ArchEntry, ...], str] | None: ...


@dataclass(frozen=True)
class Request:
    entries: tuple[ArchEntry, ...]
    origin: str  # which list was asked for: a policy row, a package key, the environment
    reason: str | None = None  # the policy row's written reason

    @property
    def from_policy(self) -> bool:
        """A policy row (always with a reason), not a package or environment override."""
        return self.reason is not None


def choose_request(  # noqa: PLR0913 - step 1's inputs, each named at the call
    policy: Policy,
    cuda: CudaVersion,
    package: PackageRequest | None = None,
    override: tuple[tuple[ArchEntry, ...], str] | None = None,
    rule: str = "",
    *,
    platform: Platform = DEFAULT_PLATFORM,
) -> Request:
    """Step 1: which list is asked for, under the row ``cuda`` (see :func:`choose_row`), as a
    build for ``platform`` reads it: the row's own list for that platform where the policy
    has one (``rows.cu130.platforms.aarch64``), else the row's list, which serves every
    platform and is clamped by that platform's torch."""
    tag = cuda.tag
    if override is not None:
        return Request(override[0], override[1])
    if package is not None:
        chosen = package.requested_for(tag)
        if chosen is not None:
            return Request(chosen[0], chosen[1])
    row = policy.row(tag, platform)
    if row is None:
        rows = ", ".join(sorted(policy.rows)) or "none"
        by_rule = f" (the row rule: {rule})" if rule else ""
        raise NoPolicyRow(
            f"the policy ({policy.source}) has no row for {tag} (CUDA {cuda.text}){by_rule}; "
            f"its rows are {rows}. archguard never falls back to a neighbouring row. Fix it "
            f"either way: add a {tag} row to the policy through the ADR process (a farm can "
            f"point ARCHGUARD_POLICY at its own policy file), or give the package an override "
            f'in pyproject.toml: [tool.archguard] arch_list_by_cuda = {{ {tag} = "8.0;9.0+PTX" }}'
            " (or arch_list)."
        )
    return Request(row.entries, row.name, row.reason)


@dataclass(frozen=True)
class Resolution:
    """The outcome of one resolution, with every decision and the inputs that made it."""

    row: RowChoice
    policy: Policy
    toolkit: Toolkit
    torch: TorchBuild
    request: Request
    decisions: tuple[Decision, ...]
    effective: tuple[ArchEntry, ...]
    notes: tuple[str, ...]
    devices: tuple[Device, ...]

    @property
    def tag(self) -> str:
        """The row's ``cuXYZ``: the policy row, the exceptions, the label and the CUDA line."""
        return self.row.tag

    @property
    def targets(self) -> Targets:
        return Targets.from_entries(self.effective)

    @property
    def ok(self) -> bool:
        return bool(self.effective)

    @property
    def effective_text(self) -> str:
        return format_list(self.effective)

    @property
    def requested_text(self) -> str:
        return format_list(self.request.entries)

    def coverage(self) -> tuple[DeviceCoverage, ...]:
        return coverage(self.targets, self.devices)

    def torch_coverage(self) -> tuple[DeviceCoverage, ...]:
        return coverage(self.torch.targets, self.devices)

    def dropped(self) -> tuple[Decision, ...]:
        return tuple(d for d in self.decisions if d.outcome is Outcome.DROPPED and not d.ptx)

    def decisions_for(self, arch: Arch) -> tuple[Decision, ...]:
        return tuple(d for d in self.decisions if d.arch == arch)

    def fate(self, arch: Arch) -> str:
        """An arch's end state in words: kept, kept+PTX, dropped (step), not requested."""
        for entry in self.effective:
            if entry.arch == arch:
                return "kept+PTX" if entry.ptx else "kept"
        for d in self.why(arch):
            if d.outcome is Outcome.DROPPED and not d.ptx:
                return f"dropped ({d.step.value})"
        return "not requested"

    def why(self, arch: Arch) -> tuple[Decision, ...]:
        """Every decision about ``arch``; for an arch nobody asked for, what would happen:
        the same steps (:class:`_Run`) run on this request with ``arch`` added, its
        decisions read off that run, the torch step judged as a what-if."""
        known = self.decisions_for(arch)
        if any(d.step is Step.REQUEST for d in known):
            return known
        asked = Decision(
            arch,
            Step.REQUEST,
            Outcome.NOT_REQUESTED,
            f"{self.request.origin} does not list it (it asks for {self.requested_text})",
        )
        request = Request((*self.request.entries, ArchEntry(arch, False)), self.request.origin)
        run = _Run(
            self.policy, self.toolkit, self.torch, self.devices, self.row, request, what_if=arch
        )
        run.steps_2_to_4()
        found = [d for d in run.decisions if d.arch == arch and d.step is not Step.REQUEST]
        return (asked, *found, *known)

    @property
    def clamp(self) -> TorchClamp:
        return TorchClamp(self.torch, self.devices, self.tag)

    def clamp_extra(self, arch: Arch, cubins: set[Arch]) -> Decision | None:
        """Would a cubin for ``arch``, added to ``cubins``, pass steps 3 and 4 (this toolkit
        emits it, this torch runs where it serves)? None if it would; else the decision
        that drops it. For targets a package hard-codes beyond the effective list."""
        decision = toolkit_decision(self.toolkit, arch)
        if decision.outcome is Outcome.DROPPED:
            return decision
        decision = self.clamp.decide(arch, cubins | {arch}, Judged.WHAT_IF)
        return decision if decision.outcome is Outcome.DROPPED else None

    def restricted(self, entries: tuple[ArchEntry, ...], origin: str) -> Resolution:
        """Steps 2-5 again with ``entries`` as the request (an extension's own bound on the
        list, e.g. its floor), so that PTX nets move as step 5 says."""
        return resolve(
            self.policy, self.toolkit, self.torch, override=(entries, origin), devices=self.devices
        )

    def require_cubins(self) -> Resolution:
        """Step 6: raise :class:`EmptyArchList` when nothing is left.

        The error carries this resolution; the code that prints it attaches the decision
        table (:func:`archguard.reports.text.render_error`).
        """
        if self.ok:
            return self
        cause = self.request.origin
        raise EmptyArchList(
            f"no cubin is left for {self.tag} with {self.torch.label}: every arch that "
            f"{cause} asks for ({self.requested_text}) was dropped, so the wheel would hold no "
            "SASS and archguard refuses to build it. "
            + (
                "The override that caused this is " + cause + ": give it an arch this toolkit "
                "emits and this torch can run. "
                if not self.request.from_policy
                else "Fix the policy row through the ADR process. "
            )
            + "The decision table follows.",
            resolution=self,
        )


@dataclass
class _Run:
    """The working state of one resolution; one method per step."""

    policy: Policy
    toolkit: Toolkit
    torch: TorchBuild
    devices: tuple[Device, ...]
    row: RowChoice
    request: Request
    current: dict[Arch, bool] = field(default_factory=dict)  # surviving arch -> +PTX
    decisions: list[Decision] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    declared_ptx: set[Arch] = field(default_factory=set)
    orphans: dict[Arch, str] = field(default_factory=dict)  # +PTX that lost its arch, why
    recorded: dict[Arch, ArchException] = field(default_factory=dict)
    ptx_on: set[Arch] = field(default_factory=set)
    what_if: Arch | None = None  # explain's "why?" for an arch nobody asked for

    @property
    def tag(self) -> str:
        return self.row.tag

    @property
    def clamp(self) -> TorchClamp:
        return TorchClamp(self.torch, self.devices, self.tag)

    def decide(
        self, arch: Arch, step: Step, outcome: Outcome, reason: str, ptx: bool = False
    ) -> None:
        self.decisions.append(Decision(arch, step, outcome, reason, ptx))

    def drop(self, arch: Arch, decision: Decision, orphan_reason: str) -> None:
        self.decisions.append(decision)
        del self.current[arch]
        if arch in self.declared_ptx:
            self.orphans[arch] = orphan_reason

    def can_carry(self, arch: Arch) -> bool:
        return self.toolkit.emits_ptx(arch.plain)

    def add_ptx(self, carrier: Arch, reason: str, outcome: Outcome = Outcome.ADDED) -> None:
        self.ptx_on.add(carrier)
        self.decide(carrier, Step.PTX, outcome, reason, ptx=True)

    # Step 1 -------------------------------------------------------------------------------
    def requested(self) -> None:
        for entry in self.request.entries:
            self.current[entry.arch] = entry.ptx
            self.decide(
                entry.arch,
                Step.REQUEST,
                Outcome.REQUESTED,
                f"{self.request.origin} asks for {entry}",
            )
        self.declared_ptx = {a for a, p in self.current.items() if p}

    def steps_2_to_4(self) -> None:
        """The request, its recorded exceptions and both clamps (step 5 places the nets)."""
        self.requested()
        self.exceptions()
        self.toolkit_clamp()
        self.torch_clamp()

    # Step 2 -------------------------------------------------------------------------------
    def exceptions(self) -> None:
        if self.torch.public_version is None and self.policy.exceptions_for(self.tag):
            self.notes.append(
                f"arch_exceptions[{self.tag}] not applied: the torch version is not known "
                "(pass --torch VERSION with --torch-arches)"
            )
        for exc in applicable_exceptions(self.policy, self.tag, self.torch):
            for arch in exc.drop:
                self.recorded.setdefault(arch, exc)
                if arch in self.current:
                    self.drop(
                        arch,
                        Decision(
                            arch, Step.EXCEPTION, Outcome.DROPPED, exception_reason(self.tag, exc)
                        ),
                        "its arch was dropped by a recorded exception",
                    )

    # Step 3 -------------------------------------------------------------------------------
    def toolkit_clamp(self) -> None:
        nvcc = f"nvcc {self.toolkit.text}"
        for arch in sorted(self.current):
            decision = toolkit_decision(self.toolkit, arch)
            if decision.outcome is Outcome.DROPPED:
                self.drop(arch, decision, f"{nvcc} cannot emit {arch.sm}")
                continue
            self.decisions.append(decision)
            if self.current[arch] and not self.can_carry(arch):
                self.current[arch] = False
                self.orphans[arch] = f"{nvcc} cannot emit {arch.plain.compute}"
                self.decide(arch, Step.TOOLKIT, Outcome.DROPPED, self.orphans[arch], ptx=True)
        # nvcc refuses sm_XY and sm_XYf in one compile ("The same GPU code ... generated for
        # non family-specific and family-specific GPU arch"); both serve the same devices.
        for arch in sorted(self.current):
            family = Arch(arch.major, arch.minor, "f")
            if not arch.suffix and family in self.current:
                ptx = self.current.pop(arch)
                self.decide(
                    arch,
                    Step.TOOLKIT,
                    Outcome.DROPPED,
                    f"{family} is also requested and serves the same devices; nvcc "
                    f"refuses to emit {arch.sm} and {family.sm} into one binary",
                )
                self.current[family] = self.current[family] or ptx

    # Step 4 -------------------------------------------------------------------------------
    def torch_clamp(self) -> None:
        # Highest first, so each cubin's interval is final when it is judged.
        for arch in sorted(self.current, reverse=True):
            judged = Judged.LIVE if arch in self.recorded else Judged.UNRECORDED
            if arch == self.what_if:
                judged = Judged.WHAT_IF
            decision = self.clamp.decide(arch, set(self.current), judged)
            if decision.outcome is Outcome.DROPPED:
                self.drop(
                    arch, decision, f"{self.torch.label} cannot run where {arch.sm} would serve"
                )
            else:
                self.decisions.append(decision)
        # Say whether the live clamp agrees with each recorded exception that applied.
        for arch in sorted(self.recorded):
            if any(d.arch == arch and d.step is Step.EXCEPTION for d in self.decisions):
                cubins = set(self.current) | {arch}
                self.decisions.append(self.clamp.decide(arch, cubins, Judged.EXCEPTED))

    # Step 5 -------------------------------------------------------------------------------
    def ptx(self) -> None:
        for arch, ptx in self.current.items():
            if ptx:
                self.add_ptx(
                    arch,
                    f"declared {arch}+PTX in {self.request.origin}: {arch.plain.compute} stays",
                    outcome=Outcome.KEPT,
                )
        for orphan, why in sorted(self.orphans.items()):
            below = [a for a in self.current if a.cc < orphan.cc and self.can_carry(a)]
            if not below:
                self.decide(
                    orphan,
                    Step.PTX,
                    Outcome.DROPPED,
                    f"declared +PTX lost: {why}, and no surviving arch below it can carry it",
                    ptx=True,
                )
                continue
            carrier = max(below)
            self.decide(
                orphan,
                Step.PTX,
                Outcome.MOVED,
                f"declared +PTX moved to {carrier}: {why}",
                ptx=True,
            )
            self.add_ptx(
                carrier,
                f"carries the PTX declared on {orphan} ({why}): {carrier.plain.compute}",
                outcome=Outcome.MOVED,
            )
        if self.current:
            self._role_highest()
            self._role_gaps()

    def _prefer_plain(self, arch: Arch) -> tuple[tuple[int, int], bool]:
        return (arch.cc, arch.suffix == "")

    def _role_highest(self) -> None:
        """Role (i): PTX on the highest arch (real codegen for future majors)."""
        highest = max(self.current, key=self._prefer_plain)
        if any(p.cc == highest.cc for p in self.ptx_on):
            return
        candidates = [a for a in self.current if a.cc == highest.cc and self.can_carry(a)]
        if candidates:
            carrier = min(candidates)
            self.add_ptx(
                carrier,
                f"role (i): the highest arch carries PTX; "
                f"{carrier.plain.compute} is real codegen for devices above "
                f"{carrier.cc_text} (future majors)",
            )

    def _role_gaps(self) -> None:
        """Role (ii): every device inside the list that no cubin serves is reached by PTX."""
        lowest = min(a.cc for a in self.current)
        highest = max(a.cc for a in self.current)
        for device in self.devices:
            if not lowest <= device.cc <= highest:
                continue
            if chosen_cubin(self.current, device.cc) is not None:
                continue
            if any(p.cc <= device.cc for p in self.ptx_on):
                continue
            below = [a for a in self.current if a.cc < device.cc and self.can_carry(a)]
            if below:
                carrier = max(below, key=self._prefer_plain)
                self.add_ptx(
                    carrier,
                    f"role (ii): no cubin serves {device} and no PTX at or "
                    f"below it reaches it; {carrier.plain.compute} on the "
                    "highest arch below it catches it (JIT-only)",
                )

    def effective(self) -> tuple[ArchEntry, ...]:
        # One PTX per capability: compute_XY is plain, so 12.0 and 12.0a share it.
        carriers: dict[tuple[int, int], Arch] = {}
        for arch in sorted(self.ptx_on, key=lambda a: (a.cc, a.suffix != "")):
            carriers.setdefault(arch.cc, arch)
        return tuple(sorted(ArchEntry(a, carriers.get(a.cc) == a) for a in self.current))


def resolve(  # noqa: PLR0913, PLR0917 - SPEC §4's inputs of one resolution, each named at the call
    policy: Policy,
    toolkit: Toolkit,
    torch: TorchBuild,
    package: PackageRequest | None = None,
    override: tuple[tuple[ArchEntry, ...], str] | None = None,
    devices: Sequence[Device] | None = None,
) -> Resolution:
    """Run steps 1-5. The result may be empty; call ``require_cubins()`` to enforce step 6."""
    row = choose_row(toolkit, torch)
    run = _Run(
        policy,
        toolkit,
        torch,
        tuple(devices or known_devices((toolkit.version.major, toolkit.version.minor))),
        row,
        choose_request(policy, row.cuda, package, override, row.rule, platform=torch.platform),
    )
    run.steps_2_to_4()
    run.ptx()
    return Resolution(
        row,
        policy,
        toolkit,
        torch,
        run.request,
        tuple(run.decisions),
        run.effective(),
        tuple(run.notes),
        run.devices,
    )
