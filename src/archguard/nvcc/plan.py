"""Planning one CUDA extension's targets and nvcc arguments: the effective list, bounded by
what the package itself hard-codes, and what each hard-coded arch flag becomes.

Pure: the build edge (:mod:`archguard._integration.build`) applies the plan. The rules
(SPEC section 5), in order:

1. **Intent.** Where the list is the policy's (no explicit ``[tool.archguard]`` list,
   ``ARCHGUARD_CONFIG`` or ``ARCHGUARD_ARCH_LIST``), the extension's hard-coded targets bound
   it: nothing below the lowest target it hard-codes is added (*floor*: for a package that
   never heard of archguard, that is its only statement of its kernel floor), and an
   extension whose hard-coded targets are all ``a``/``f`` gets exactly those (*arch-specific
   only*: its kernels were written for those chips). An explicit list wins over inferred
   intent.
2. **Arch-specific targets** the package hard-codes are kept where the clamps allow, in place
   of their plain twin (``hardcoded_arch_specific``).
3. **PTX nets**: a net never sits as plain ``compute_X`` beside an ``Xa``/``Xf``-only ``X``
   (that PTX is compiled with ``__CUDA_ARCH__ == X0`` but without the arch-specific features,
   so ``Xa``-only code in it does not assemble); it moves to the highest plain arch below.
4. **Proofs**: a target for which the lint proves an ``#error`` is reached is dropped,
   whatever asked for it.

An extension left with no cubin is an :class:`~archguard.errors.EmptyExtension`.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

from archguard.core.arch import Arch, ArchEntry, Targets, format_list, split_target
from archguard.core.decisions import Outcome, Step
from archguard.core.modes import DEFAULT_ARCH_SPECIFIC, ArchSpecific
from archguard.core.resolve import Resolution
from archguard.errors import ArchSpecificFlag, EmptyExtension
from archguard.nvcc.flags import ArchFlag, find_arch_flags, gencode_flags


class Rule(str, enum.Enum):
    """How an extension's hard-coded targets bound the list it gets."""

    LIST = "list"  # it hard-codes no target: the effective list
    EXPLICIT = "explicit"  # an explicit list wins over what it hard-codes
    FLOOR = "floor"  # nothing below its lowest hard-coded target
    ARCH_SPECIFIC_ONLY = "arch-specific-only"  # exactly its a/f targets

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Intent:
    """The rule applied to one extension, and the flag it came from."""

    rule: Rule
    reason: str
    floor: Arch | None = None
    flag: str | None = None

    def record(self) -> dict[str, object]:
        return {
            "rule": self.rule.value,
            "reason": self.reason,
            "floor": self.floor.sm if self.floor else None,
            "flag": self.flag,
        }


@dataclass(frozen=True)
class ExtensionPlan:
    """What one extension's nvcc argument lists become, the targets its binary will hold,
    where each came from, what was left out of it and why, and what to say about it."""

    name: str
    args: dict[str, list[str]]  # per key of extra_compile_args ("nvcc", "nvcc_dlink")
    targets: Targets
    origins: dict[str, str]  # sm_/compute_ name -> where it came from
    kept: dict[Arch, Arch | None]  # hard-coded a/f target kept -> the plain cubin it replaces
    warnings: list[str]
    notes: list[str]
    per_key: dict[str, dict[str, list[str]]]  # key -> {"dropped": [...], "replaced": [...]}
    intent: Intent = field(default_factory=lambda: Intent(Rule.LIST, ""))
    hard: Targets = field(default_factory=lambda: Targets(frozenset(), frozenset()))
    left_out: dict[str, str] = field(default_factory=dict)  # effective target -> why not here
    proven: dict[str, str] = field(default_factory=dict)  # target -> the #error it reaches

    @property
    def gencode(self) -> list[str]:
        return gencode_flags(self.targets)

    @property
    def added(self) -> list[str]:
        """The targets archguard adds beyond what the extension hard-codes itself."""
        own = set(self.hard.names())
        return [n for n in self.targets.names() if n not in own]


def list_text(targets: Targets) -> str:
    """Targets as an arch list (``8.0;9.0a+PTX``: ``+PTX`` is plain PTX of that capability)."""
    entries = []
    for arch in sorted(targets.cubins):
        twin_plain = arch.suffix and arch.plain in targets.cubins
        entries.append(ArchEntry(arch, arch.plain in targets.ptx and not twin_plain))
    return format_list(entries)


def _why_not(res: Resolution, arch: Arch) -> str:
    decisions = [d for d in res.why(arch) if d.outcome in (Outcome.DROPPED, Outcome.NOT_REQUESTED)]
    return decisions[-1].reason if decisions else "not in the effective list"


def _effective_origins(res: Resolution) -> dict[str, str]:
    origins = {a.sm: f"the effective list ({res.request.origin})" for a in res.targets.cubins}
    for d in res.decisions:
        if d.ptx and d.step is Step.PTX and d.outcome is not Outcome.DROPPED:
            origins[d.arch.plain.compute] = f"a PTX net of the effective list: {d.reason}"
    return {name: origins[name] for name in res.targets.names() if name in origins}


def _union(flags: list[ArchFlag]) -> Targets:
    cubins = frozenset(a for f in flags for a in f.targets.cubins)
    ptx = frozenset(a for f in flags for a in f.targets.ptx)
    return Targets(cubins, ptx)


def _intent(flags: list[ArchFlag], hard: Targets, res: Resolution, mode: ArchSpecific) -> Intent:
    every = hard.cubins | hard.ptx
    if not every:
        return Intent(Rule.LIST, "it hard-codes no target: the effective list")
    if not res.request.from_policy:
        return Intent(
            Rule.EXPLICIT,
            f"{res.request.origin} is an explicit list: it wins over the targets the extension "
            "hard-codes",
        )
    texts = {
        a: " ".join(f.tokens) for f in reversed(flags) for a in f.targets.cubins | f.targets.ptx
    }
    if mode == "keep" and hard.cubins and all(a.suffix for a in every):
        names = " ".join(a.sm for a in sorted(hard.cubins))
        flag = "; ".join(sorted({texts[a] for a in hard.cubins}))
        return Intent(
            Rule.ARCH_SPECIFIC_ONLY,
            f"it hard-codes only arch-specific targets ({names} from {flag!r}): it gets exactly "
            "those, no plain targets and no PTX nets",
            flag=flag,
        )
    lowest = min(every, key=lambda a: (a.cc, a.suffix))
    floor = lowest.plain
    return Intent(
        Rule.FLOOR,
        f"nothing below its floor {floor.sm}, the lowest target its hard-coded nvcc flag "
        f"{texts[lowest]!r} names; the policy fills the list from there up",
        floor=floor,
        flag=texts[lowest],
    )


def _bounded(
    name: str, res: Resolution, intent: Intent, hard: Targets
) -> tuple[Resolution, set[Arch], set[Arch], dict[str, str]]:
    """The list under the rule: (the resolution it comes from, cubins, PTX, what of the
    effective list was left out and why). Under a floor the request is cut there and steps
    2-5 run again (PTX nets move down as step 5 says); where the policy has nothing at or
    above the floor, the extension's own hard-coded targets are the request."""
    if intent.rule is Rule.ARCH_SPECIFIC_ONLY:
        why = f"extension {name} hard-codes only arch-specific targets"
        left_out = {n: why for n in res.targets.names()}
        return res, set(), set(), left_out
    base = res
    if intent.rule is Rule.FLOOR and intent.floor is not None:
        floor = intent.floor
        entries = tuple(e for e in res.request.entries if e.arch.cc >= floor.cc)
        origin = f"{res.request.origin} from extension {name}'s floor {floor.sm} up"
        if not entries:
            entries = tuple(
                ArchEntry(a, a.plain in hard.ptx) for a in sorted(hard.cubins) if a.cc >= floor.cc
            )
            origin = (
                f"extension {name}'s own hard-coded targets ({res.request.origin} has nothing "
                f"at or above its floor {floor.sm})"
            )
        base = res.restricted(entries, origin)
    cubins, ptx = set(base.targets.cubins), set(base.targets.ptx)
    why = (
        f"below extension {name}'s floor {intent.floor.sm} (from {intent.flag!r})"
        if intent.floor
        else ""
    )
    left_out = {n: why for n in res.targets.names() if n not in base.targets.names()}
    return base, cubins, ptx, left_out


def _keep_specific(
    specific: list[Arch], cubins: set[Arch], hard: Targets, res: Resolution
) -> tuple[dict[Arch, Arch | None], dict[Arch, str]]:
    """Keep each hard-coded a/f cubin the clamps allow (in place of its plain twin, which a
    plain twin the package hard-codes itself keeps beside an ``a``); ``cubins`` is updated."""
    kept: dict[Arch, Arch | None] = {}
    refused: dict[Arch, str] = {}
    for arch in specific:
        decision = res.clamp_extra(arch, cubins)
        if decision is not None:
            refused[arch] = decision.reason
        else:
            kept[arch] = None
    for arch in kept:
        twin = arch.plain
        if twin in cubins and not (arch.suffix == "a" and twin in hard.cubins):
            cubins.discard(twin)
            kept[arch] = twin
        cubins.add(arch)
    return kept, refused


def _move_nets(
    name: str, cubins: set[Arch], ptx: set[Arch], displaced: set[Arch]
) -> tuple[dict[str, str], dict[str, str]]:
    """Where a kept ``Xa``/``Xf`` displaced the list's plain ``X`` (``displaced``), move the
    plain ``compute_X`` net that ``X`` carried down (``ptx`` is updated): (left out -> why,
    moved-to net -> origin). A list that itself asks for ``Xa+PTX`` keeps its own choice."""
    left_out: dict[str, str] = {}
    origins: dict[str, str] = {}
    plain = {a for a in cubins if not a.suffix}
    for net in sorted(ptx):
        specific = sorted(a for a in cubins if a.plain == net and a.suffix)
        if net in plain or not specific or net not in displaced:
            continue
        ptx.discard(net)
        below = max((a for a in plain if a.cc < net.cc), default=None)
        feat = f"__CUDA_ARCH_FEAT_SM{net.digits}_ALL"
        why = (
            f"plain {net.compute} beside {specific[0].sm} with no plain {net.sm} is compiled "
            f"with __CUDA_ARCH__ == {net.major * 100 + net.minor * 10} but without {feat}, so "
            f"{specific[0].sm}-only code in it does not assemble"
        )
        if below is None:
            left_out[net.compute] = f"{why}; no plain arch below it in extension {name} carries it"
            continue
        left_out[net.compute] = f"{why}; the net moved to {below.compute}"
        if below not in ptx:
            ptx.add(below)
            origins[below.compute] = (
                f"the {net.compute} PTX net, moved down in extension {name}: {why}"
            )
    return left_out, origins


def _apply_proofs(
    proven: Mapping[str, str], cubins: set[Arch], ptx: set[Arch], kept: dict[Arch, Arch | None]
) -> dict[str, str]:
    out: dict[str, str] = {}
    for target, reason in sorted(proven.items()):
        split = split_target(target)
        if split is None:
            continue
        kind, arch = split
        remaining = cubins if kind == "sm" else ptx
        if arch in remaining:
            remaining.discard(arch)
            kept.pop(arch, None)
            out[target] = f"the lint proves {reason} is reached for it"
    return out


def _specific_refused(name: str, flags: list[ArchFlag], specific: list[Arch]) -> ArchSpecificFlag:
    """hardcoded_arch_specific = 'error' and the extension hard-codes an a/f target."""
    texts = sorted({" ".join(f.tokens) for f in flags})
    return ArchSpecificFlag(
        f"extension {name} hard-codes the arch-specific target"
        f"{'s' if len(specific) > 1 else ''} {' '.join(a.sm for a in specific)} "
        f"({'; '.join(repr(f) for f in texts)}) and [tool.archguard] "
        "hardcoded_arch_specific = 'error'. Keep it for this extension with "
        "hardcoded_arch_specific = 'keep', replace it by the effective list with 'drop', "
        "or declare the arch in [tool.archguard] arch_list_by_cuda."
    )


def _no_cubin(
    name: str, intent: Intent, left_out: dict[str, str], refused: dict[Arch, str]
) -> EmptyExtension:
    """The extension is left with no cubin: what left it so, and the fix."""
    why = "; ".join(f"{n}: {r}" for n, r in sorted(left_out.items()))
    refusals = "; ".join(f"{a.sm}: {r}" for a, r in sorted(refused.items()))
    return EmptyExtension(
        f"extension {name} is left with no cubin ({intent.reason}"
        + (f"; refused by the clamps: {refusals}" if refusals else "")
        + (f"; left out: {why}" if why else "")
        + "), so its binary would hold no SASS and archguard refuses to build it. Give the "
        "extension an arch this toolkit emits, this torch runs and its kernels compile for: "
        'in [tool.archguard] arch_list = "..." (or a file named by ARCHGUARD_CONFIG), or '
        "ARCHGUARD_ARCH_LIST."
    )


def plan_extension(
    name: str,
    arg_lists: dict[str, list[str]],
    res: Resolution,
    arch_specific: ArchSpecific = DEFAULT_ARCH_SPECIFIC,
    proven: Mapping[str, str] | None = None,
) -> ExtensionPlan:
    """Every arch flag out of each nvcc argument list and this extension's targets in (the
    module's rules). ``proven``: target name -> the ``#error`` the lint proves it reaches.

    ``arch_specific = "drop"`` treats a hard-coded ``a``/``f`` target like a plain one (a
    cost choice); ``"error"`` stops with :class:`ArchSpecificFlag`.
    """
    mode = arch_specific
    split = {key: find_arch_flags(list(args)) for key, args in arg_lists.items()}
    flags = [f for _, found in split.values() for f in found]
    hard = _union(flags)
    effective = res.targets
    specific = sorted(a for a in hard.cubins if a.suffix and a not in effective.cubins)
    if specific and mode == "error":
        raise _specific_refused(name, flags, specific)
    intent = _intent(flags, hard, res, mode)
    res, cubins, ptx, left_out = _bounded(name, res, intent, hard)
    kept: dict[Arch, Arch | None] = {}
    refused: dict[Arch, str] = {}
    if mode == "keep":
        wanted = sorted(a for a in hard.cubins if a.suffix and a not in cubins)
        kept, refused = _keep_specific(wanted, cubins, hard, res)
    displaced = {twin for twin in kept.values() if twin is not None}
    moved_out, moved_origins = _move_nets(name, cubins, ptx, displaced)
    left_out |= moved_out
    dropped_by_proof = _apply_proofs(proven or {}, cubins, ptx, kept)
    left_out |= dropped_by_proof
    targets = Targets(frozenset(cubins), frozenset(ptx))

    origins = _effective_origins(res) | moved_origins
    for arch in kept:
        text = "; ".join(sorted({" ".join(f.tokens) for f in flags if arch in f.targets.cubins}))
        origins[arch.sm] = (
            f"the hard-coded nvcc flag {text!r} of extension {name} (kept: an arch-specific "
            "target is a kernel requirement)"
        )
    if not targets.cubins:
        raise _no_cubin(name, intent, left_out, refused)
    reasons = _Why(res, mode, refused, dropped_by_proof)
    per_key = {
        key: _flag_lines(name, found, targets, kept, reasons) for key, (_, found) in split.items()
    }
    return ExtensionPlan(
        name=name,
        args={key: rest + gencode_flags(targets) for key, (rest, _) in split.items()},
        targets=targets,
        origins={n: origins.get(n, "the effective list") for n in targets.names()},
        kept=kept,
        warnings=[w for lines in per_key.values() for w in lines["dropped"]],
        notes=[n for lines in per_key.values() for n in lines["replaced"]],
        per_key=per_key,
        intent=intent,
        hard=hard,
        left_out={n: r for n, r in left_out.items() if n not in targets.names()},
        proven=dict(proven or {}),
    )


@dataclass(frozen=True)
class _Why:
    """Why a hard-coded target is not among an extension's targets: the clamps (through
    the resolution), the arch-specific mode, the refusals of kept targets, the lint's
    proofs."""

    res: Resolution
    mode: ArchSpecific
    refused: Mapping[Arch, str]
    proofs: Mapping[str, str]


def _flag_lines(
    name: str,
    found: list[ArchFlag],
    targets: Targets,
    kept: Mapping[Arch, Arch | None],
    why: _Why,
) -> dict[str, list[str]]:
    """One line per hard-coded flag: what it asked for, what stays, what was dropped, why."""
    res, mode, refused, proofs = why.res, why.mode, why.refused, why.proofs
    dropped: list[str] = []
    replaced: list[str] = []
    for flag in found:
        text = " ".join(flag.tokens)
        out_cubins = sorted(flag.targets.cubins - targets.cubins)
        out_ptx = sorted(flag.targets.ptx - targets.ptx)
        specific_kept = sorted(a for a in flag.targets.cubins & targets.cubins if a.suffix)
        if out_cubins or out_ptx:
            reasons = [
                f"{a.sm}: "
                + (proofs.get(a.sm) or refused.get(a) or _why_not(res, a))
                + (" (hardcoded_arch_specific = 'drop')" if a.suffix and mode == "drop" else "")
                for a in out_cubins
            ]
            nets = " ".join(a.compute for a in sorted(targets.ptx)) or "none"
            from_list = f"the PTX nets come from the list ({nets})"
            reasons += [f"{a.compute}: {proofs.get(a.compute) or from_list}" for a in out_ptx]
            names = [a.sm for a in out_cubins] + [a.compute for a in out_ptx]
            kept_text = " ".join(a.sm for a in specific_kept)
            dropped.append(
                f"extension {name}: dropped the hard-coded nvcc flag {text!r}: "
                f"{' '.join(names)} not in the extension's targets"
                + (f" ({'; '.join(reasons)})" if reasons else "")
                + (f"; kept {kept_text} from it (a kernel requirement)" if kept_text else "")
                + ". Declare arches in [tool.archguard] arch_list instead of nvcc flags."
            )
        elif specific_kept:
            places = [
                f", in place of the effective list's {twin.sm}"
                for a in specific_kept
                if (twin := kept.get(a)) is not None
            ]
            replaced.append(
                f"extension {name}: kept the hard-coded arch-specific target"
                f"{'s' if len(specific_kept) > 1 else ''} "
                f"{' '.join(a.sm for a in specific_kept)} from {text!r} (a kernel requirement)"
                + "".join(places)
            )
        else:
            replaced.append(
                f"extension {name}: the hard-coded nvcc flag {text!r} is within "
                "the effective list; archguard's flags replace it"
            )
    return {"dropped": dropped, "replaced": replaced}
