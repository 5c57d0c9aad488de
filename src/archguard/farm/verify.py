"""``archguard farm verify SITE``: every wheel each published index links (each cell's, each
CUDA line's), re-read
against the index and the jobs' ledgers: the file is in the store, its bytes have the sha256
the index advertises (and the store's folder names), and a ledger of that cell publishes it
with that sha256. Nothing is built or changed."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from archguard.detect.sources import file_sha256
from archguard.errors import ConfigError
from archguard.farm.ledger import PUBLISHED, STATE, all_ledgers, store_path
from archguard.farm.manifest import LINE
from archguard.farm.publish import INDEX, read_links
from archguard.farm.wheelmeta import VARIANTS

VERIFY_SCHEMA = "archguard.farm-verify/1"


@dataclass
class SiteCheck:
    wheels: int = 0  # links read
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def _published_by_cell(site: Path) -> tuple[dict[str, dict[str, set[str]]], dict[str, set[str]]]:
    """cell -> wheel -> every sha256 a ledger publishes it with (an earlier build of a job
    whose inputs changed has a ledger too: the index names one of them); and the same for
    every cell at once, which a CUDA line's index (SITE/cu130/simple) lists from."""
    by_cell: dict[str, dict[str, set[str]]] = {}
    everywhere: dict[str, set[str]] = {}
    for ledger in all_ledgers(site).values():
        if ledger.status in PUBLISHED:
            for w in ledger.wheels:
                sha = ledger.sha256.get(w, "")
                by_cell.setdefault(ledger.cell, {}).setdefault(w, set()).add(sha)
                everywhere.setdefault(w, set()).add(sha)
    return by_cell, everywhere


def verify_site(site: Path) -> SiteCheck:
    if not (site / STATE).is_dir():
        raise ConfigError(
            f"archguard farm verify: {site} holds no farm site (no {STATE}/ folder); give the "
            "SITE that farm run wrote (its -o)."
        )
    by_cell, everywhere = _published_by_cell(site)
    out = SiteCheck()
    for index in sorted(site.glob(f"*/{INDEX}")):
        cell = index.parent.name
        line = LINE.match(cell) is not None
        if not (index / "index.html").is_file():
            out.problems.append(f"{cell}: its index {index} has no index.html")
            continue
        for name, sha in sorted(read_links(index)):
            out.wheels += 1
            where = f"{cell}: {name}"
            path = store_path(site, name, sha)
            if not path.is_file():
                out.problems.append(f"{where}: the index links {path}, which is missing")
                continue
            found = file_sha256(path)
            if found != sha:
                out.problems.append(
                    f"{where}: its bytes have sha256 {found}, not the {sha} the index and the "
                    "store's folder name"
                )
            if name.endswith(VARIANTS):  # made for the index from its variant wheels
                continue
            ledgered = (everywhere if line else by_cell.get(cell, {})).get(name)
            if ledgered is None:
                whose = f"of a cell of CUDA line {cell}" if line else f"of cell {cell}"
                out.problems.append(f"{where}: no job's ledger {whose} publishes it")
            elif sha not in ledgered:
                out.problems.append(
                    f"{where}: its ledgers say sha256 {', '.join(sorted(ledgered))}, the index "
                    f"{sha}"
                )
    return out


def render(check: SiteCheck, site: Path, fmt: str) -> str:
    if fmt == "json":
        data = {
            "schema": VERIFY_SCHEMA,
            "site": str(site),
            "ok": check.ok,
            "wheels": check.wheels,
            "problems": check.problems,
        }
        return json.dumps(data, indent=2) + "\n"
    lines = [f"  {p}" for p in check.problems]
    verdict = "OK" if check.ok else f"{len(check.problems)} problem(s)"
    lines.append(f"archguard farm verify: {check.wheels} published wheel(s) read: {verdict}")
    return "\n".join(lines) + "\n"
