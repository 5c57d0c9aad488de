"""``SITE/site.json`` (:mod:`archguard.core.site`) from the manifest and every job's ledger,
written with the indexes and the page: what ``archguard which`` and the page's finder read."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from archguard.binaries.facts import WheelFacts
from archguard.core.platform import platform_of_tag
from archguard.core.site import SITE_JSON, Site, SiteCell, SiteWheel
from archguard.core.wheelfile import split_variant
from archguard.detect.machine import platform_floor, platform_glibc
from archguard.farm.ledger import PUBLISHED, STATE, STORE, Outcome, write_atomic
from archguard.farm.manifest import Manifest
from archguard.farm.publish import INDEX
from archguard.farm.wheelmeta import platform_of


def _facts(ledgers: Iterable[Outcome]) -> dict[str, WheelFacts]:
    """Each wheel's facts (what archguard wheel read back) by name, from whichever job's
    ledger built it."""
    out: dict[str, WheelFacts] = {}
    for ledger in ledgers:
        for d in ledger.details:
            out.setdefault(d.name, d)
    return out


def _compiled_with(toolkit: object, line: str) -> str | None:
    """The toolkit's CUDA where it is not the line's own (only then does a driver for the
    line fall short of its PTX)."""
    return str(toolkit) if toolkit and str(toolkit) != line else None


def site_data(
    site: Path, manifest: Manifest, ledgers: Mapping[str, Outcome], jobs: Iterable[str]
) -> Site:
    current = [ledgers[j] for j in jobs if j in ledgers]
    current = [
        r for r in current if r.status in PUBLISHED and all(p.is_file() for p in r.stored(site))
    ]
    facts = _facts(current)
    cells = {c.name: c for c in manifest.cells}
    wheels = []
    for ledger in sorted(current, key=lambda r: (r.cell, r.package)):
        cell = cells.get(ledger.cell)
        if cell is None:
            continue
        own = _facts([ledger])  # its own build's facts first: another cell's may differ
        for name in ledger.wheels:
            if split_variant(name)[1] is not None:  # a variant copy: its plain wheel says it
                continue
            fact = own.get(name) or facts.get(name)
            sha = ledger.sha256.get(name, "")
            glibc = platform_glibc(platform_of(name))
            wheels.append(
                SiteWheel(
                    name,
                    sha,
                    ledger.package,
                    ledger.cell,
                    cell.cuda.text,
                    fact.targets if fact else (),
                    fact.pin if fact else None,
                    f"{STATE}/jobs/{ledger.job}.json",  # its ledger
                    f"{STORE}/{sha}/{name}",
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
