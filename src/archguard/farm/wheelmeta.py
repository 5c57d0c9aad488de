"""What an index says about each wheel besides its link (PEP 658 / PEP 714), and which
wheels a CUDA line's index lists.

- Each stored wheel's core metadata is kept beside it, byte for byte as the wheel holds it
  (``SITE/wheels/<sha256>/<name>.metadata``), and its link says so
  (``data-dist-info-metadata`` and ``data-core-metadata``: ``sha256=<hex>`` of that file) and
  carries ``data-requires-python`` where the wheel says it: a resolver chooses among
  hundred-megabyte CUDA wheels reading a few kilobytes, and downloads only the one it picks.
- A CUDA line's index (``SITE/cu130/simple/``) holds every cell's wheels of that CUDA: each
  ``+cu130torchX.Y`` wheel pinned to its torch minor, so an installer that holds the
  installed torch (a constraint ``torch==2.13.0``) picks the wheel built against it. Where a
  stable-ABI wheel of the same version (labelled ``+cu130``, its pin ``torch>=FLOOR``) serves
  a torch where they install (the same platform; abi3 from a CPython at or below theirs),
  the torch-specific wheels it serves are left out of the line's index: it is the one wheel
  for them (its label alone would sort below theirs, PEP 440 comparing local
  segments as text). Two cells that built the same file name differently: the first cell's
  is listed, the other named.
- A wheel's PEP 825 variant copy (``[farm] variants``) is listed beside it, with the
  ``NAME-VERSION-variants.json`` of its version (from each variant's own ``variant.json``),
  stored by its content like a wheel; the plain wheel is the fallback where no variant
  serves the machine. pip skips the variant files (their names are not a wheel's to it).
"""

from __future__ import annotations

import hashlib
import json
import re
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.tags import Tag
from packaging.utils import canonicalize_name

from archguard.core.wheelfile import (
    VARIANTS_JSON,
    InvalidWheelFilename,
    parse_metadata,
    parse_wheel_name,
)
from archguard.farm.ledger import store_path, write_atomic

METADATA = ".metadata"  # PEP 658: the metadata file's name is the wheel's plus this
VARIANTS = VARIANTS_JSON  # PEP 825: NAME-VERSION-variants.json beside the variant wheels
_TORCH_LABEL = re.compile(r"^(?P<cuda>cu\d+)torch(?P<torch>\d+\.\d+)$")


@dataclass(frozen=True)
class WheelMeta:
    """A stored wheel's core metadata as an index uses it."""

    sha256: str  # of the .metadata file
    requires_python: str | None
    requires: tuple[str, ...] = field(default_factory=tuple)


def platform_of(name: str) -> str:
    """A wheel's platform tag as written in its file name (a variant's label left out):
    ``x-1.0-cp311-cp311-manylinux_2_28_x86_64.whl`` -> ``manylinux_2_28_x86_64``; "" for a
    name that is no wheel's."""
    try:
        return parse_wheel_name(name).platform
    except InvalidWheelFilename:
        return ""


def variants_json(site: Path, wheels: Sequence[tuple[str, str]]) -> list[tuple[str, bytes]]:
    """For each (name, version) with variant wheels among ``wheels``: its
    ``NAME-VERSION-variants.json``, every variant's properties from its own
    ``.dist-info/variant.json`` (the providers and priorities the wheels declare)."""
    groups: dict[str, dict[str, Any]] = {}
    for name, sha in wheels:
        try:
            wheel = parse_wheel_name(name)
        except InvalidWheelFilename:
            continue
        if wheel.variant is None:
            continue
        try:
            with zipfile.ZipFile(store_path(site, name, sha)) as zf:
                member = next(n for n in zf.namelist() if n.endswith(".dist-info/variant.json"))
                data = json.loads(zf.read(member))
        except (OSError, zipfile.BadZipFile, StopIteration, ValueError):
            continue
        merged = groups.setdefault(
            wheel.variants_json,
            {
                "$schema": data.get("$schema"),
                "default-priorities": data.get("default-priorities", {}),
                "providers": {},
                "variants": {},
            },
        )
        merged["providers"].update(data.get("providers") or {})
        merged["variants"].update(data.get("variants") or {})
    return [
        (n, (json.dumps(d, indent=2, sort_keys=True) + "\n").encode())
        for n, d in sorted(groups.items())
    ]


def metadata_file(site: Path, name: str, sha: str) -> Path:
    return store_path(site, name, sha).with_name(name + METADATA)


def metadata_of(site: Path, name: str, sha: str) -> WheelMeta | None:
    """The wheel's METADATA, written beside it in the store once (byte for byte), and what an
    index says of it; None when the wheel is not readable."""
    path = metadata_file(site, name, sha)
    if not path.is_file():
        wheel = store_path(site, name, sha)
        try:
            with zipfile.ZipFile(wheel) as zf:
                member = next(
                    n
                    for n in zf.namelist()
                    if n.endswith(".dist-info/METADATA") and n.count("/") == 1
                )
                data = zf.read(member)
        except (OSError, zipfile.BadZipFile, StopIteration):
            return None
        write_atomic(path, data)
    data = path.read_bytes()
    read = parse_metadata(data)
    python = read.requires_python
    return WheelMeta(
        hashlib.sha256(data).hexdigest(), python.strip() if python else None, read.requires_dist
    )


def _torch_specifier(meta: WheelMeta | None) -> Requirement | None:
    for text in meta.requires if meta else ():
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        if canonicalize_name(req.name) == "torch" and req.marker is None:
            return req
    return None


def _serves(stable: Requirement | None, torch: str) -> bool:
    """Whether a stable-ABI wheel with this torch requirement (None: it links no torch)
    serves torch ``X.Y``."""
    return stable is None or stable.specifier.contains(f"{torch}.0", prereleases=True)


def _covers(stable: frozenset[Tag], tags: frozenset[Tag]) -> bool:
    """Whether a stable-ABI wheel's tags install wherever these tags do: the same platform,
    and the same tag or ``abi3`` from a CPython at or below this one."""

    def version(interpreter: str) -> tuple[int, ...]:
        digits = interpreter.removeprefix("cp")
        return (int(digits[0]), int(digits[1:] or 0)) if digits.isdigit() else (99,)

    return all(
        any(
            s == t
            or (
                s.platform == t.platform
                and s.abi == "abi3"
                and t.interpreter.startswith("cp")
                and version(s.interpreter) <= version(t.interpreter)
            )
            for s in stable
        )
        for t in tags
    )


def line_wheels(
    by_cell: Sequence[Sequence[tuple[str, str]]], metas: dict[tuple[str, str], WheelMeta | None]
) -> tuple[list[tuple[str, str]], list[str]]:
    """The wheels of one CUDA line's index, from its cells' (in manifest order), and what
    was left out, said: a second build of one file name, a torch-specific wheel a stable-ABI
    wheel of the same version serves."""
    chosen: dict[str, str] = {}
    notes: list[str] = []
    for wheels in by_cell:
        for name, sha in wheels:
            if chosen.get(name, sha) != sha:
                notes.append(f"{name}: two cells built it differently; the first cell's listed")
                continue
            chosen[name] = sha
    # (project, public version) -> each stable-ABI wheel's torch requirement and tags
    stable: dict[tuple[str, str], list[tuple[Requirement | None, frozenset[Tag]]]] = {}
    # name -> (project, public, torch X.Y, tags)
    torch_of: dict[str, tuple[str, str, str, frozenset[Tag]]] = {}
    for name, sha in chosen.items():
        try:
            wheel = parse_wheel_name(name)
        except InvalidWheelFilename:
            continue
        project, version, tags = wheel.project, wheel.version, wheel.tags
        local = version.local or ""
        label = _TORCH_LABEL.match(local)
        if label:
            torch_of[name] = (project, version.public, label["torch"], tags)
        elif local.startswith("cu") and wheel.variant is None:
            requirement = _torch_specifier(metas.get((name, sha)))
            stable.setdefault((project, version.public), []).append((requirement, tags))
    out = []
    for name, sha in sorted(chosen.items()):
        if name in torch_of:
            owner, public, torch, tags = torch_of[name]
            serving = stable.get((owner, public), [])
            if any(_serves(s, torch) and _covers(t, tags) for s, t in serving):
                notes.append(
                    f"{name}: left out of the line's index: the stable-ABI wheel of "
                    f"{owner} {public} serves torch {torch}"
                )
                continue
        out.append((name, sha))
    return out, notes
