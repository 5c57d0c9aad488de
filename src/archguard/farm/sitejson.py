"""``SITE/site.json`` (:mod:`archguard.core.site`) from the manifest and every job's record,
written with the indexes and the page: what ``archguard which`` and the page's finder read."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from archguard.binaries.facts import WheelFacts
from archguard.core.platform import platform_of_tag
from archguard.core.site import SITE_JSON, Site, SiteCell, SiteWheel
from archguard.detect.machine import platform_floor, platform_glibc
from archguard.farm.manifest import Manifest
from archguard.farm.publish import INDEX
from archguard.farm.records import POOL, PUBLISHED, STATE, Outcome, write_atomic
from archguard.farm.wheelmeta import platform_of, split_variant


def _facts(records: Iterable[Outcome]) -> dict[str, WheelFacts]:
    """Each wheel's facts (what archguard wheel read back) by name, from whichever record
    built it."""
    out: dict[str, WheelFacts] = {}
    for record in records:
        for d in record.details:
            out.setdefault(d.name, d)
    return out


def _compiled_with(toolkit: object, line: str) -> str | None:
    """The toolkit's CUDA where it is not the line's own (only then does a driver for the
    line fall short of its PTX)."""
    return str(toolkit) if toolkit and str(toolkit) != line else None


def site_data(
    site: Path, manifest: Manifest, records: Mapping[str, Outcome], jobs: Iterable[str]
) -> Site:
    current = [records[j] for j in jobs if j in records]
    current = [
        r for r in current if r.status in PUBLISHED and all(p.is_file() for p in r.pooled(site))
    ]
    facts = _facts(current)
    cells = {c.name: c for c in manifest.cells}
    wheels = []
    for record in sorted(current, key=lambda r: (r.cell, r.package)):
        cell = cells.get(record.cell)
        if cell is None:
            continue
        own = _facts([record])  # its own build's facts first: another cell's may differ
        for name in record.wheels:
            if split_variant(name)[1] is not None:  # a variant copy: its plain wheel says it
                continue
            fact = own.get(name) or facts.get(name)
            sha = record.sha256.get(name, "")
            glibc = platform_glibc(platform_of(name))
            wheels.append(
                SiteWheel(
                    name,
                    sha,
                    record.package,
                    record.cell,
                    cell.cuda.text,
                    fact.targets if fact else (),
                    fact.pin if fact else None,
                    f"{STATE}/jobs/{record.job}.json",
                    f"{POOL}/{sha}/{name}",
                    _compiled_with(fact.compiled_with if fact else None, cell.cuda.text),
                    f"{glibc[0]}.{glibc[1]}" if glibc else None,
                    platform_floor(platform_of(name)),
                    platform_of_tag(platform_of(name)),
                )
            )
    return Site(
        tuple(
            SiteCell(
                c.name,
                c.cuda.text,
                str(c.torch),
                c.python,
                f"{c.name}/{INDEX}/",
                c.index_url,
                c.platform,
            )
            for c in manifest.cells
        ),
        {c.cuda.tag: f"{c.cuda.tag}/{INDEX}/" for c in manifest.cells},
        tuple(wheels),
        os.environ.get("GITHUB_REPOSITORY") or None,
    )


def write_site_json(site: Path, data: Site) -> None:
    write_atomic(site / SITE_JSON, json.dumps(data.as_json(), indent=2) + "\n")
