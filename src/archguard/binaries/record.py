"""The resolution record: what a wheel carries in ``.dist-info/archguard.json``.

This module owns the record's file name, its schema, writing it and reading it back.
``explain --format json`` prints the same record; ``verify`` reads the targets it promises.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from archguard import __version__
from archguard.core.arch import Arch, Targets, parse_targets
from archguard.core.coverage import runs_on
from archguard.core.resolve import Resolution
from archguard.core.toolkit import known_arches
from archguard.errors import BinaryReadError
from archguard.nvcc.flags import gencode_flags

RECORD_NAME = "archguard.json"
# /2: each extension of a built wheel records its kernels' stub classification per image
# ("stubs": {kernel: {image: kind}}, from the in-build check), which `doctor` reads. /1
# records (no stubs) are still read; a reader that knows only /1 rejects /2 by its schema.
RESOLUTION_SCHEMA = "archguard.resolution/2"
READABLE_SCHEMAS = ("archguard.resolution/1", RESOLUTION_SCHEMA)


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


def targets_record(targets: Targets) -> dict[str, list[str]]:
    return {
        "cubins": [a.sm for a in sorted(targets.cubins)],
        "ptx": [a.compute for a in sorted(targets.ptx)],
    }


def resolution_record(res: Resolution, why: Sequence[Arch] = ()) -> dict[str, object]:
    """The machine-readable resolution (explain --format json, and the wheel's record)."""
    torch = res.torch
    record: dict[str, object] = {
        "schema": RESOLUTION_SCHEMA,
        "archguard": __version__,
        "cuda": {"version": res.toolkit.text, "tag": res.tag, "source": res.toolkit.source},
        "torch": {
            "version": str(torch.version) if torch.version is not None else None,
            "cuda": torch.cuda.text if torch.cuda else None,
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
                "step": d.step.value,
                "outcome": d.outcome.value,
                "ptx": d.ptx,
                "reason": d.reason,
            }
            for d in res.decisions
        ],
        "effective": res.effective_text,
        "entries": [str(e) for e in res.effective],
        "targets": targets_record(res.targets),
        "gencode": gencode_flags(res.effective),
        "coverage": coverage_record(res),
        "notes": list(res.notes),
    }
    if why:
        record["why"] = {
            str(a): {
                "fate": res.fate(a),
                "decisions": [
                    {
                        "step": d.step.value,
                        "outcome": d.outcome.value,
                        "ptx": d.ptx,
                        "reason": d.reason,
                    }
                    for d in res.why(a)
                ],
            }
            for a in why
        }
    return record


def write_record(dist_info: Path, record: dict[str, object]) -> Path:
    """Write ``record`` as ``dist_info/archguard.json``; return the path."""
    path = dist_info / RECORD_NAME
    path.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return path


def is_record_name(name: str) -> bool:
    """Is this (POSIX) path inside a wheel or tree an archguard record?"""
    parts = name.rsplit("/", 2)
    return len(parts) >= 2 and parts[-1] == RECORD_NAME and parts[-2].endswith(".dist-info")


@dataclass(frozen=True)
class RecordedTargets:
    """What a record promises: the wheel's targets and a label naming the record and its
    list, and per extension (by its file inside the wheel) that extension's own targets."""

    targets: Targets
    label: str
    extensions: dict[str, tuple[str, Targets]] = field(default_factory=dict)  # file -> name

    def for_file(self, member: str) -> tuple[str, Targets] | None:
        """The extension whose binary ``member`` is (a path in a wheel or a tree)."""
        for file, found in self.extensions.items():
            if member == file or member.endswith("/" + file):
                return found
        return None


def targets_from_record(value: object, where: str) -> Targets:
    """``{"cubins": [...], "ptx": [...]}`` back to Targets (ValueError if malformed)."""
    if not isinstance(value, dict):
        raise ValueError("targets must be an object with cubins and ptx")
    names = list(value["cubins"]) + list(value["ptx"])
    if not all(isinstance(n, str) for n in names):
        raise ValueError("targets must be sm_/compute_ names")
    if not names:
        return Targets(frozenset(), frozenset())
    return parse_targets(names, where, known=known_arches())


def read_record(text: str, where: str) -> RecordedTargets:
    """The targets a record promises (:class:`BinaryReadError` if it is not a record)."""
    try:
        data = json.loads(text)
        if not isinstance(data, dict) or data.get("schema") not in READABLE_SCHEMAS:
            raise ValueError(f"not an {' or '.join(READABLE_SCHEMAS)} record")
        targets = targets_from_record(data["targets"], where)
        extensions: dict[str, tuple[str, Targets]] = {}
        build = data.get("build")
        for ext in build.get("extensions", []) if isinstance(build, dict) else []:
            if isinstance(ext, dict) and ext.get("file") and "targets" in ext:
                name = str(ext.get("name"))
                extensions[str(ext["file"])] = (
                    name,
                    targets_from_record(ext["targets"], f"{where} extension {name}"),
                )
        cuda: dict[str, object] = data["cuda"] if isinstance(data.get("cuda"), dict) else {}
        torch: dict[str, object] = data["torch"] if isinstance(data.get("torch"), dict) else {}
        label = (
            f"{where} ({data.get('effective')}; {cuda.get('tag')}, torch {torch.get('version')})"
        )
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise BinaryReadError(f"{where} is not a readable archguard record ({exc}).") from None
    return RecordedTargets(targets, label, extensions)
