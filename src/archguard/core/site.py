"""``SITE/site.json``: what a farm's site publishes, for machines (``archguard which``, the
page's finder): its cells (CUDA, torch, Python, index, where their torch comes from), its
CUDA lines' indexes, and every published wheel with what it holds and what it needs. The
farm writes it from its records; readers parse it here, in one place (an error of the
caller's type names what is wrong)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

SITE_SCHEMA = "archguard.site/1"
SITE_JSON = "site.json"  # its name at the site's root


@dataclass(frozen=True)
class SiteCell:
    name: str
    cuda: str  # "13.0"
    torch: str  # the cell's requirement: "torch==2.13.0"
    python: str  # "3.11"
    index: str  # relative to the site: "torch2.13/simple/"
    torch_index: str | None = None  # where the cell's torch comes from
    platform: str = "x86_64"  # the machine its wheels are for: x86_64, aarch64


@dataclass(frozen=True)
class SiteWheel:
    name: str
    sha256: str
    package: str
    cell: str  # the cell that built it
    cuda: str  # its CUDA line, the cell torch's CUDA: "13.0"
    targets: tuple[str, ...]  # cubins and PTX read back: ("sm_80", "compute_80")
    pin: str | None  # its torch requirement: "torch>=2.13,<2.14"; None: none
    record: str  # the job record it came from, relative to the site
    path: str  # the wheel, relative to the site: "wheels/<sha256>/<name>"
    # the toolkit that compiled it, where its minor is not the line's ("13.5"): its PTX
    # JIT-compiles only on a driver for that CUDA or newer
    compiled_with: str | None = None
    # what its platform tag asks of a machine: the glibc ("2.28"; None: not a manylinux
    # tag) and in words, "glibc >= 2.28 (RHEL 8, Ubuntu 20.04 and newer)"
    glibc: str | None = None
    platform_floor: str | None = None
    platform: str | None = None  # its tag's machine: x86_64, aarch64 (None: any)


@dataclass(frozen=True)
class Site:
    cells: tuple[SiteCell, ...]
    lines: dict[str, str]  # CUDA line tag ("cu130") -> its index, relative: "cu130/simple/"
    wheels: tuple[SiteWheel, ...]
    repository: str | None = None  # the GitHub repository whose workflow attests the wheels
    notes: tuple[str, ...] = field(default_factory=tuple)

    def as_json(self) -> dict[str, object]:
        return {
            "schema": SITE_SCHEMA,
            "repository": self.repository,
            "cells": [asdict(c) for c in self.cells],
            "lines": dict(self.lines),
            "wheels": [{**asdict(w), "targets": list(w.targets)} for w in self.wheels],
        }


def _text(data: Mapping[str, Any], key: str, where: str, error: type[Exception]) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value:
        raise error(f"{where}: {key} = {value!r} is not a text (an {SITE_SCHEMA} file?)")
    return value


def _maybe(data: Mapping[str, Any], key: str) -> str | None:
    value = data.get(key)
    return value if isinstance(value, str) and value else None


def parse_site(data: object, where: str, error: type[Exception]) -> Site:
    """``site.json``'s data as a :class:`Site`; ``error`` (the caller's type) names the
    first thing that is not what the schema says."""
    if not isinstance(data, dict) or data.get("schema") != SITE_SCHEMA:
        found = data.get("schema") if isinstance(data, dict) else type(data).__name__
        raise error(
            f"{where} is not an {SITE_SCHEMA} file (schema {found!r}): give a farm's SITE "
            "(the directory farm run wrote, or its URL)."
        )
    cells, wheels = data.get("cells"), data.get("wheels")
    lines = data.get("lines")
    if not isinstance(cells, list) or not isinstance(wheels, list) or not isinstance(lines, dict):
        raise error(f"{where}: cells, lines and wheels must be a list, a table and a list")
    out_cells = []
    for i, c in enumerate(cells):
        at = f"{where} cells[{i}]"
        if not isinstance(c, dict):
            raise error(f"{at} is not a table")
        out_cells.append(
            SiteCell(
                _text(c, "name", at, error),
                _text(c, "cuda", at, error),
                _text(c, "torch", at, error),
                _text(c, "python", at, error),
                _text(c, "index", at, error),
                _maybe(c, "torch_index"),
                _maybe(c, "platform") or "x86_64",
            )
        )
    out_wheels = []
    for i, w in enumerate(wheels):
        at = f"{where} wheels[{i}]"
        if not isinstance(w, dict):
            raise error(f"{at} is not a table")
        targets = w.get("targets")
        if not isinstance(targets, list) or not all(isinstance(t, str) for t in targets):
            raise error(f"{at}: targets = {targets!r} is not a list of targets")
        out_wheels.append(
            SiteWheel(
                _text(w, "name", at, error),
                _text(w, "sha256", at, error),
                _text(w, "package", at, error),
                _text(w, "cell", at, error),
                _text(w, "cuda", at, error),
                tuple(targets),
                _maybe(w, "pin"),
                _text(w, "record", at, error),
                _text(w, "path", at, error),
                _maybe(w, "compiled_with"),
                _maybe(w, "glibc"),
                _maybe(w, "platform_floor"),
                _maybe(w, "platform"),
            )
        )
    return Site(
        tuple(out_cells),
        {str(k): str(v) for k, v in lines.items()},
        tuple(out_wheels),
        _maybe(data, "repository"),
    )
