"""Presenting a resolution: the decision table, ``explain`` text, and the JSON record.

The same :class:`~archguard.resolve.Resolution` feeds ``explain``, ``list``, the build log
and the record stored in the wheel, so they cannot disagree.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterable, Sequence

from archguard import __version__
from archguard.arch import Arch
from archguard.coverage import DeviceCoverage, Tier, runs_on
from archguard.errors import NotRepresentable
from archguard.flags import cmake_architectures, gencode_flags, torch_arch_list
from archguard.resolve import Decision, Resolution

RESOLUTION_SCHEMA = "archguard.resolution/1"
LIST_SCHEMA = "archguard.list/1"
WIDTH = 100


def _wrap(text: str, indent: int, first: str = "") -> list[str]:
    lines = textwrap.wrap(
        text, width=WIDTH - indent, break_long_words=False, break_on_hyphens=False
    ) or [""]
    pad = " " * indent
    return [(first.ljust(indent) if i == 0 else pad) + line for i, line in enumerate(lines)]


def fate(res: Resolution, arch: Arch) -> str:
    """One word for an arch's end state: kept, kept+PTX, dropped (step), not requested."""
    for entry in res.effective:
        if entry.arch == arch:
            return "kept+PTX" if entry.ptx else "kept"
    for d in res.why(arch):
        if d.outcome == "dropped" and not d.ptx:
            return f"dropped ({d.step})"
    return "not requested"


def _ordered_arches(res: Resolution) -> list[Arch]:
    seen: dict[Arch, None] = {}
    for d in res.decisions:
        seen.setdefault(d.arch, None)
    return sorted(seen)


def decision_rows(decisions: Iterable[Decision]) -> list[str]:
    """``step  outcome  reason`` lines, indented under their arch."""
    lines: list[str] = []
    for d in decisions:
        what = f"{d.outcome}{' PTX' if d.ptx else ''}"
        lines += _wrap(d.reason, 33, f"       {d.step:<10} {what:<14}")
    return lines


def decision_table(res: Resolution) -> str:
    """Every arch, its end state, and each step's decision with its reason.

    The request step is left out (the request is printed once above the table).
    """
    lines = [f"  {'arch':<6} => fate", f"       {'step':<10} {'outcome':<14} reason"]
    for arch in _ordered_arches(res):
        rows = [d for d in res.fate(arch) if d.step != "request"] or list(res.fate(arch))
        lines.append(f"  {arch!s:<6} => {fate(res, arch)}")
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
            out += ["", f"Why {arch}? => {fate(res, arch)}"]
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


def coverage_record(res: Resolution) -> list[dict[str, object]]:
    return [
        {
            "cc": c.device.cc_text,
            "device": c.device.name,
            "tier": c.tier.value,
            "via": c.via,
            "torch_runs": runs_on(res.torch.targets, c.device.cc),
        }
        for c in res.coverage()
    ]


def resolution_record(res: Resolution, why: Sequence[Arch] = ()) -> dict[str, object]:
    """The machine-readable resolution (explain --format json, and the wheel's record)."""
    torch = res.torch
    record: dict[str, object] = {
        "schema": RESOLUTION_SCHEMA,
        "archguard": __version__,
        "cuda": {"version": res.toolkit.text, "tag": res.tag, "source": res.toolkit.source},
        "torch": {
            "version": str(torch.version) if torch.version is not None else None,
            "cuda": f"{torch.cuda[0]}.{torch.cuda[1]}" if torch.cuda else None,
            "targets": torch.targets.names(),
            "source": torch.source,
        },
        "policy": {"source": res.policy.source, "sha256": res.policy.digest or None},
        "request": {
            "origin": res.request.origin,
            "reason": res.request.reason,
            "list": res.requested_text,
        },
        "decisions": [
            {
                "arch": str(d.arch),
                "step": d.step,
                "outcome": d.outcome,
                "ptx": d.ptx,
                "reason": d.reason,
            }
            for d in res.decisions
        ],
        "effective": res.effective_text,
        "entries": [str(e) for e in res.effective],
        "targets": {
            "cubins": [a.sm for a in sorted(res.targets.cubins)],
            "ptx": [a.compute for a in sorted(res.targets.ptx)],
        },
        "gencode": gencode_flags(res.effective),
        "coverage": coverage_record(res),
        "notes": list(res.notes),
    }
    if why:
        record["why"] = {
            str(a): {
                "fate": fate(res, a),
                "decisions": [
                    {"step": d.step, "outcome": d.outcome, "ptx": d.ptx, "reason": d.reason}
                    for d in res.why(a)
                ],
            }
            for a in why
        }
    return record


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
            "targets": {
                "cubins": [a.sm for a in sorted(res.targets.cubins)],
                "ptx": [a.compute for a in sorted(res.targets.ptx)],
            },
        }
    )
