"""Presenting a resolution to people: the decision table, ``explain``, ``list``, the build
log, and errors with the table attached.

The same :class:`~archguard.resolve.Resolution` feeds ``explain``, ``list``, the build log
and the record stored in the wheel (:mod:`archguard.record`), so they cannot disagree.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterable, Sequence

from archguard import __version__
from archguard.arch import Arch
from archguard.coverage import DeviceCoverage, Tier
from archguard.errors import ArchguardError, EmptyArchList, NotRepresentable
from archguard.flags import cmake_architectures, gencode_flags, torch_arch_list
from archguard.record import targets_record
from archguard.resolve import Decision, Outcome, Resolution, Step

LIST_SCHEMA = "archguard.list/1"
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
) -> str:
    out = [f"archguard {__version__} explain", "", "Inputs"]
    for key, value in inputs:
        out += _wrap(value, 14, f"  {key}")
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
    notes = [*res.notes, *warnings]
    if notes:
        out += ["", "Notes"]
        for note in notes:
            out += _wrap(note, 4, "  - ")
    return "\n".join(out) + "\n"


def dumps(data: object) -> str:
    return json.dumps(data, indent=2, sort_keys=False) + "\n"


def list_text(res: Resolution, fmt: str) -> str:
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
    if isinstance(exc, EmptyArchList) and exc.detail is None and exc.resolution is not None:
        assert isinstance(exc.resolution, Resolution)
        exc.detail = decision_table(exc.resolution)
    return exc.render()
