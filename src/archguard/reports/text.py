"""Presenting a resolution to people: the decision table, ``explain``, ``list``, the build
log, and errors with the table attached.

The same :class:`~archguard.core.resolve.Resolution` feeds ``explain``, ``list``, the build log
and the record stored in the wheel (:mod:`archguard.binaries.record`), so they cannot disagree.
"""

from __future__ import annotations

import json
import shlex
import textwrap
from collections.abc import Iterable, Sequence

from archguard import __version__
from archguard.binaries.record import targets_record
from archguard.core.arch import Arch
from archguard.core.coverage import DeviceCoverage, Tier, coverage
from archguard.core.decisions import Decision, Outcome, Step
from archguard.core.formats import EnvFormat, ListFormat
from archguard.core.resolve import Resolution
from archguard.detect.compcache import cache_variables
from archguard.errors import ArchguardError, EmptyArchList, NotRepresentable
from archguard.nvcc.flags import (
    arch_variables,
    cmake_architectures,
    gencode_flags,
    torch_arch_list,
)
from archguard.nvcc.plan import ExtensionPlan, Rule

LIST_SCHEMA = "archguard.list/1"
ERROR_SCHEMA = "archguard.error/1"
WIDTH = 100


def _wrap(text: str, indent: int, first: str = "") -> list[str]:
    lines = textwrap.wrap(
        text, width=WIDTH - indent, break_long_words=False, break_on_hyphens=False
    ) or [""]
    pad = " " * indent
    return [(first.ljust(indent) if i == 0 else pad) + line for i, line in enumerate(lines)]


def _ordered_arches(res: Resolution) -> list[Arch]:
    seen: dict[Arch, None] = {}
    for d in res.decisions:
        seen.setdefault(d.arch, None)
    return sorted(seen)


def decision_rows(decisions: Iterable[Decision]) -> list[str]:
    """``step  outcome  reason`` lines, indented under their arch."""
    lines: list[str] = []
    for d in decisions:
        what = f"{d.outcome.value}{' PTX' if d.ptx else ''}"
        lines += _wrap(d.reason, 33, f"       {d.step.value:<10} {what:<14}")
    return lines


def decision_table(res: Resolution) -> str:
    """Every arch, its end state, and each step's decision with its reason.

    The request step is left out (the request is printed once above the table).
    """
    lines = [f"  {'arch':<6} => fate", f"       {'step':<10} {'outcome':<14} reason"]
    for arch in _ordered_arches(res):
        rows = [d for d in res.decisions_for(arch) if d.step is not Step.REQUEST] or list(
            res.decisions_for(arch)
        )
        lines.append(f"  {arch!s:<6} => {res.fate(arch)}")
        lines += decision_rows(rows)
    lines.append(f"effective: {res.effective_text or '(empty: no cubin left)'}")
    return "\n".join(lines)


def _tier_lines(cov: Sequence[DeviceCoverage]) -> list[str]:
    lines = []
    for tier in Tier:
        items = [c for c in cov if c.tier is tier]
        if not items:
            text = "none"
        elif tier is Tier.DEAD:
            text = ", ".join(str(c.device) for c in items)
        else:
            text = ", ".join(f"{c.device} via {c.via}" for c in items)
        lines += _wrap(text, 14, f"  {tier.value}")
    return lines


def explain_text(
    res: Resolution,
    inputs: Sequence[tuple[str, str]] = (),
    warnings: Sequence[str] = (),
    why: Sequence[Arch] = (),
    build_time: Sequence[str] = (),
) -> str:
    """``explain``'s text. ``build_time``: what is known before the build about the
    per-extension targets a build decides (hard-coded ``a``/``f`` targets seen in the
    project's build files)."""
    out = [f"archguard {__version__} explain", "", "Inputs"]
    for key, value in inputs:
        out += _wrap(value, 14, f"  {key}")
    out += _wrap(f"{res.tag}: {res.row.rule}", 14, "  row")
    out += _wrap(f"{res.request.origin}: {res.requested_text}", 14, "  request")
    if res.request.reason:
        out += _wrap(f"reason: {res.request.reason}", 14, "")
    if why:
        for arch in why:
            out += ["", f"Why {arch}? => {res.fate(arch)}"]
            out += decision_rows(res.why(arch))
    out += ["", "Decisions", *decision_table(res).splitlines()[:-1]]
    out += ["", f"Effective list  {res.effective_text or '(empty: no cubin left)'}"]
    if res.ok:
        out += _wrap(" ".join(gencode_flags(res.effective)), 14, "  nvcc")
    known = len(res.devices)
    out += ["", f"Coverage over {known} known devices (a wheel built with this list)"]
    out += _tier_lines(res.coverage())
    torch_cannot = [c.device for c in res.torch_coverage() if c.tier is Tier.DEAD]
    if torch_cannot:
        out += _wrap(", ".join(str(d) for d in torch_cannot), 14, "  no torch")
        out += _wrap(
            f"({res.torch.label} itself cannot run on these, whatever the wheel holds)", 14, ""
        )
    if build_time:
        out += ["", "Decided at build time"]
        for line in build_time:
            out += _wrap(line, 4, "  - ")
    notes = [*res.notes, *warnings]
    if notes:
        out += ["", "Notes"]
        for note in notes:
            out += _wrap(note, 4, "  - ")
    return "\n".join(out) + "\n"


def dumps(data: object) -> str:
    return json.dumps(data, indent=2, sort_keys=False) + "\n"


def list_text(res: Resolution, fmt: ListFormat) -> str:
    """``archguard list`` output in one of: text (default), torch, cmake, gencode, json."""
    if fmt == "text":
        return res.effective_text + "\n"
    if fmt == "torch":
        return torch_arch_list(res.effective) + "\n"
    if fmt == "cmake":
        return cmake_architectures(res.effective) + "\n"
    if fmt == "gencode":
        return " ".join(gencode_flags(res.effective)) + "\n"
    try:
        torch_text: str | None = torch_arch_list(res.effective)
    except NotRepresentable:
        torch_text = None
    return dumps(
        {
            "schema": LIST_SCHEMA,
            "cuda": res.tag,
            "torch": str(res.torch.version) if res.torch.version is not None else None,
            "effective": res.effective_text,
            "entries": [str(e) for e in res.effective],
            "torch_arch_list": torch_text,
            "cmake": cmake_architectures(res.effective),
            "gencode": gencode_flags(res.effective),
            "targets": targets_record(res.targets),
        }
    )


def build_log_lines(
    res: Resolution, inputs: Sequence[tuple[str, str]], warnings: Sequence[str]
) -> list[str]:
    """The build log's account of a resolution: inputs, each notable decision, the list."""
    lines = [f"{key}: {value}" for key, value in inputs]
    if res.row.cuda != res.toolkit.version:  # the rule chose another index than nvcc's
        lines.append(f"row: {res.tag}: {res.row.rule}")
    lines.append(f"request: {res.request.origin}: {res.requested_text}")
    for d in res.decisions:
        notable = d.outcome in (Outcome.DROPPED, Outcome.MOVED, Outcome.ADDED)
        if notable or (d.step is Step.TORCH and d.outcome is not Outcome.KEPT):
            what = f"{d.outcome.value}{' PTX' if d.ptx else ''}"
            lines.append(f"{what} {d.arch} ({d.step.value}): {d.reason}")
    lines += [f"warning: {note}" for note in [*res.notes, *warnings]]
    lines.append(f"effective arch list ({res.tag}): {res.effective_text}")
    lines.append("coverage: " + tiers_text(res.coverage()))
    return lines


def tiers_text(cov: Iterable[DeviceCoverage]) -> str:
    """One line: ``native 7.5, 8.0; jit-only 11.0 via compute_90; dead 6.0`` (tiers in the
    order their first device appears)."""
    tiers: dict[str, list[str]] = {}
    for c in cov:
        tiers.setdefault(c.tier.value, []).append(
            c.device.cc_text + (f" via {c.via}" if c.tier is Tier.JIT else "")
        )
    return "; ".join(f"{k} {', '.join(v)}" for k, v in tiers.items())


def render_error(exc: ArchguardError) -> str:
    """An error as a person sees it: ``render()``, with the decision table attached to an
    :class:`~archguard.errors.EmptyArchList` that carries its resolution."""
    _attach_table(exc)
    return exc.render()


def error_json(exc: ArchguardError) -> str:
    """An error as a machine reads it under ``--format json``: ``{"schema", "error": {"code",
    "message", "detail"}}`` (the catalogue's code; the detail is null where there is none)."""
    _attach_table(exc)
    error = {"code": exc.code, "message": exc.message, "detail": exc.detail}
    return json.dumps({"schema": ERROR_SCHEMA, "error": error}, indent=2) + "\n"


def _attach_table(exc: ArchguardError) -> None:
    if isinstance(exc, EmptyArchList) and exc.detail is None and exc.resolution is not None:
        assert isinstance(exc.resolution, Resolution)
        exc.detail = decision_table(exc.resolution)


def extension_lines(plan: ExtensionPlan, res: Resolution) -> list[str]:
    """For an extension whose targets differ from the wheel's effective list (it keeps a
    hard-coded ``a``/``f`` target): what differs, its own coverage tiers, and a warning that
    names every device the extension no longer serves natively, with the fix."""
    if plan.targets == res.targets:
        return []
    wheel = {c.device.cc: c for c in res.coverage()}
    own = coverage(plan.targets, res.devices)
    kept = [
        f"{arch.sm} in place of {twin.sm}" if twin else f"{arch.sm} added"
        for arch, twin in sorted(plan.kept.items())
    ]
    if plan.intent.rule is Rule.FLOOR and plan.intent.floor is not None:
        kept.insert(0, f"floor {plan.intent.floor.sm}")
    lines = [
        f"extension {plan.name}: its targets differ from the wheel's effective list "
        f"({', '.join(kept) or 'see above'}): {plan.targets}",
        f"extension {plan.name} coverage: {tiers_text(own)}",
    ]
    if plan.intent.rule is Rule.ARCH_SPECIFIC_ONLY:
        native = [str(c.device) for c in own if c.tier is Tier.NATIVE]
        lines.append(
            f"extension {plan.name} serves natively only {', '.join(native) or 'no device'}; "
            "every other device is dead for it (its kernels were written for those chips)"
        )
        return lines
    floor = plan.intent.floor.cc if plan.intent.floor else (0, 0)  # below it: on purpose
    lost = [
        c
        for c in own
        if c.tier is not Tier.NATIVE
        and wheel[c.device.cc].tier is Tier.NATIVE
        and c.device.cc >= floor
    ]
    if lost:
        fixes = []
        for c in lost:
            replaced_by = [
                a for a, twin in plan.kept.items() if twin and twin.major == c.device.cc[0]
            ]
            fix = []
            for arch in sorted(replaced_by):
                family = Arch(arch.major, arch.minor, "f")
                if arch.suffix == "a" and res.toolkit.emits_cubin(family):
                    fix.append(f"hard-code {family.sm} instead of {arch.sm} if its kernels allow")
            own_a = Arch(c.device.cc[0], c.device.cc[1], "a")
            if res.toolkit.emits_cubin(own_a):
                fix.append(f"add {own_a.sm}")
            how = f" (now {c.tier.value}{' via ' + c.via if c.via else ''})"
            fixes.append(f"{c.device}{how}: " + (" or ".join(fix) or "no arch-specific fix"))
        lines.append(
            f"warning: extension {plan.name} no longer serves natively what the wheel's "
            f"effective list serves: {'; '.join(fixes)}"
        )
    return lines


ENV_SCHEMA = "archguard.env/1"


def env_text(res: Resolution, fmt: EnvFormat, cache: str | None = None) -> tuple[str, list[str]]:
    """``archguard env``: (stdout text, notes for stderr) in sh, github or json. ``cache``:
    the compile cache chosen (``compiler_cache``), whose variables are printed too."""

    found = arch_variables(res.effective)
    values, unset, notes = dict(found.values), found.unset, list(found.notes)
    if cache and cache != "off":
        values |= cache_variables(cache)
    if fmt == "json":
        data = {
            "schema": ENV_SCHEMA,
            "cuda": res.tag,
            "torch": str(res.torch.version) if res.torch.version is not None else None,
            "effective": res.effective_text,
            "set": values,
            "unset": unset,
            "notes": notes,
        }
        return dumps(data), []
    if fmt == "github":  # lines for $GITHUB_ENV, which takes no comments
        text = "".join(f"{k}={v}\n" for k, v in values.items())
        return text, [f"{k} not set: {why}" for k, why in unset.items()] + notes
    lines = [
        f"# archguard {__version__}: the arch list for {res.tag}, {res.torch.label} "
        f"({res.request.origin}): {res.effective_text}"
    ]
    lines += [f"export {k}={shlex.quote(v)}" for k, v in values.items()]
    lines += [f"unset {k}  # {why}" for k, why in unset.items()]
    lines += [f"# {note}" for note in notes]
    return "\n".join(lines) + "\n", []
