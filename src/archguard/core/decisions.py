"""What one resolution step decides about one arch, in words: the steps, the outcomes, the
decision record, and the judgements of steps 2-4 that both a resolution and its "why?" use
(:mod:`archguard.core.resolve`). Pure."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from archguard.core.arch import Arch
from archguard.core.coverage import Device, describe_devices, runs_on, served_devices
from archguard.core.policy import ArchException, Policy
from archguard.core.toolkit import Toolkit
from archguard.core.torchbuild import TorchBuild


class Step(str, enum.Enum):
    """The resolution steps of SPEC §4, in order (step 6, empty, raises instead)."""

    REQUEST = "request"
    EXCEPTION = "exception"
    TOOLKIT = "toolkit"
    TORCH = "torch"
    PTX = "ptx"

    def __str__(self) -> str:
        return self.value


class Outcome(str, enum.Enum):
    """What a step did to an arch (or, with ``Decision.ptx``, to its PTX)."""

    REQUESTED = "requested"
    NOT_REQUESTED = "not-requested"  # explain's "why?" for an arch nobody asked for
    KEPT = "kept"
    DROPPED = "dropped"
    ADDED = "added"  # PTX added by a role of step 5
    MOVED = "moved"  # declared PTX moved down to a surviving arch
    CONFIRMS = "confirms"  # the live clamp agrees with a recorded exception
    NOTE = "note"  # the live clamp alone would keep what a recorded exception drops

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Decision:
    """What one step did to one arch, and why. ``ptx`` marks a decision about the entry's
    PTX rather than its cubin."""

    arch: Arch
    step: Step
    outcome: Outcome
    reason: str
    ptx: bool = False


def _names(arches: Sequence[Arch], attr: str) -> str:
    return " ".join(getattr(a, attr) for a in sorted(arches))


def _hi(devices: Sequence[Device]) -> str:
    return max(devices, key=lambda d: d.cc).cc_text


def torch_gap(torch: TorchBuild, cubin: Arch, served: Sequence[Device]) -> str:
    """Why ``torch`` cannot run on any of ``served`` (the devices a cubin would serve)."""
    hi = _hi(served)
    same_major = [c for c in torch.targets.cubins if c.major == cubin.major]
    if same_major:
        cubins = (
            f"it ships no {cubin.major}.x cubin at or below {hi} (its {cubin.major}.x "
            f"cubins: {_names(same_major, 'sm')})"
        )
    else:
        cubins = f"it ships no {cubin.major}.x cubin at all"
    ptx = (
        f"its PTX: {_names(list(torch.targets.ptx), 'compute')}"
        if torch.targets.ptx
        else "it ships no PTX at all"
    )
    return f"{cubins} and no PTX at or below {hi} ({ptx})"


def applicable_exceptions(policy: Policy, tag: str, torch: TorchBuild) -> tuple[ArchException, ...]:
    version = torch.public_version
    if version is None:
        return ()
    return tuple(e for e in policy.exceptions_for(tag) if e.applies_to(version))


def exception_reason(tag: str, exc: ArchException) -> str:
    return f"arch_exceptions[{tag}] for torch {exc.torch}: {exc.reason}"


def toolkit_decision(toolkit: Toolkit, arch: Arch) -> Decision:
    if toolkit.emits_cubin(arch):
        return Decision(arch, Step.TOOLKIT, Outcome.KEPT, f"nvcc {toolkit.text} emits {arch.sm}")
    plain = toolkit.plain_cubins()
    span = f"{plain[0].sm} ... {plain[-1].sm}" if plain else "nothing"
    return Decision(
        arch,
        Step.TOOLKIT,
        Outcome.DROPPED,
        f"nvcc {toolkit.text} cannot emit {arch.sm} (it emits {span})",
    )


class Judged(enum.Enum):
    """How step 4 judges a cubin: for real (with or without an ``arch_exceptions`` record
    for it), to confirm a recorded exception, or as a what-if (``explain``'s "why?", a
    target a package hard-codes)."""

    LIVE = "live"  # an exception records this drop
    UNRECORDED = "unrecorded"  # no exception records it: a drop here means a stale record
    EXCEPTED = "excepted"
    WHAT_IF = "what-if"


@dataclass(frozen=True)
class TorchClamp:
    """Step 4 for one toolkit tag, torch and device list."""

    torch: TorchBuild
    devices: Sequence[Device]
    tag: str

    def decide(self, arch: Arch, cubins: set[Arch], judged: Judged) -> Decision:
        torch = self.torch
        served = served_devices(arch, cubins, self.devices)
        if not served:
            return Decision(
                arch,
                Step.TORCH,
                Outcome.DROPPED,
                f"{arch.sm} would serve no known device in this list (nothing in "
                "archguard's bundled devices.yml lies in its interval), so it is dead weight",
            )
        runnable = [d for d in served if runs_on(torch.targets, d.cc)]
        if runnable:
            return self._runs(arch, served, runnable, judged)
        reason = (
            f"{arch.sm} would serve {describe_devices(served)}, and {torch.label} cannot "
            f"run on any of them: {torch_gap(torch, arch, served)}"
        )
        if judged is Judged.EXCEPTED:
            return Decision(
                arch,
                Step.TORCH,
                Outcome.CONFIRMS,
                f"the clamp agrees with arch_exceptions: {reason}",
            )
        if judged is Judged.UNRECORDED:
            reason += (
                f". arch_exceptions[{self.tag}] does not record this drop for {torch.label}: "
                "arch_exceptions is stale; add it through the ADR process"
            )
        return Decision(arch, Step.TORCH, Outcome.DROPPED, reason)

    def _runs(
        self, arch: Arch, served: Sequence[Device], runnable: list[Device], judged: Judged
    ) -> Decision:
        on = describe_devices(runnable)
        if len(runnable) == len(served):
            on = "it" if len(served) == 1 else "all of them"
        reason = f"{arch.sm} serves {describe_devices(served)}; {self.torch.label} runs on {on}"
        if judged is Judged.EXCEPTED:
            return Decision(
                arch,
                Step.TORCH,
                Outcome.NOTE,
                f"the live clamp alone would keep it ({reason}); the recorded "
                "exception still drops it",
            )
        return Decision(arch, Step.TORCH, Outcome.KEPT, reason)
