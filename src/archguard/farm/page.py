"""``SITE/index.html``: every package x cell of the manifest, built or why not, with each
wheel's facts (verified, its coverage tiers, what it binds to, its platform and the glibc
floor that asks of a machine, its sha256 and the job's ledger it came from), the install
command of each cell's index, and, while a run goes, how many jobs are done."""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from pathlib import Path

from archguard.core.arch import Targets, parse_targets
from archguard.core.coverage import Tier, coverage, known_devices
from archguard.core.cuda import CudaVersion
from archguard.core.site import Site
from archguard.core.toolkit import known_arches
from archguard.detect.machine import platform_floor
from archguard.farm.finder import finder_html
from archguard.farm.ledger import STORE, USAGE, Outcome, write_atomic
from archguard.farm.manifest import Cell, Manifest
from archguard.farm.wheelmeta import platform_of


def tiers(targets: Sequence[str], cuda: CudaVersion) -> dict[Tier, list[str]]:
    """The known devices (capabilities) of the cell's CUDA by how a wheel holding
    ``targets`` runs on them: native, PTX JIT only, or not at all."""
    held = (
        parse_targets(list(targets), "the job's ledger", known=known_arches())
        if targets
        else Targets(frozenset(), frozenset())
    )
    out: dict[Tier, list[str]] = {tier: [] for tier in Tier}
    for row in coverage(held, known_devices((cuda.major, cuda.minor))):
        out[row.tier].append(row.device.cc_text)
    return out


def _wheel_html(cell: Cell, name: str, outcome: Outcome) -> str:
    """One published wheel on the page: its link, its sha256 and the job's ledger it came from,
    whether it verified, its coverage tiers, what it binds to (its torch pin and why) and its
    platform."""
    sha = outcome.sha256.get(name, "")
    link = (
        f'<br><a href="{STORE}/{sha}/{html.escape(name)}">{html.escape(name)}</a>'
        f'<br><span class="sha">sha256 {sha}, from <a href=".farm/jobs/{outcome.job}.json">'
        f"job {html.escape(outcome.job)}</a></span>"
    )
    w = next((d for d in outcome.details if d.name == name), None)
    platform = platform_of(name)  # the tag pip judges: its name's
    floor = f"platform {platform}: {platform_floor(platform)}"
    if w is None:  # served by another cell's wheel: its other facts are on that cell's entry
        return f'{link}<ul class="facts"><li>{html.escape(floor)}</li></ul>'
    targets = list(w.targets)
    by_tier = tiers(targets, cell.cuda)
    verified = "verified" if w.ok else "NOT verified"
    lines = [
        f"{verified}: {' '.join(targets) or 'no CUDA code'}",
        f"native on {', '.join(by_tier[Tier.NATIVE]) or 'no known GPU'}",
        f"PTX JIT only on {', '.join(by_tier[Tier.JIT]) or 'none'}",
        f"runs on none of {', '.join(by_tier[Tier.DEAD]) or 'none'}",
    ]
    if w.label_why:
        pin = f"requires {w.pin}: " if w.pin else ""
        lines.append(f"ABI: {pin}{w.label_why}")
    elif w.label_note:
        lines.append(f"ABI: {w.label_note}")
    if w.serves:
        lines.append(f"serves {w.serves} (stable ABI, abi3)")
    lines.append(floor)
    rows = "".join(f"<li>{html.escape(line)}</li>" for line in lines)
    return f'{link}<ul class="facts">{rows}</ul>'


def write_page(
    site: Path,
    manifest: Manifest,
    outcomes: Sequence[Outcome],
    running: tuple[int, int] | None = None,
    data: Site | None = None,
) -> None:
    """SITE/index.html: every package x cell, built or why not, with each wheel's facts
    (verified, coverage tiers, ABI, sha256, ledger) and its log; while a run goes
    (``running``: how many of its jobs are done, of how many), "waiting" for the others."""
    by = {(o.package, o.cell): o for o in outcomes}
    absent = "not run" if running is None else "waiting"
    head = "".join(f"<th>{html.escape(c.name)}</th>" for c in manifest.cells)
    rows = []
    for package in manifest.packages:
        cells = []
        for cell in manifest.cells:
            o = by.get((package.name, cell.name))
            if o is None:
                cells.append(f"<td>{absent}</td>")
                continue
            text = {
                "built": "built",
                "kept": "built (earlier run)",
                "skipped": "skipped",
                "served": "served by another cell",
                "failed": "FAILED",
            }[o.status]
            wheels = "".join(_wheel_html(cell, w, o) for w in o.wheels)
            why = f"<br>{html.escape(o.why)}" if o.why else ""
            log = f'<br><a href="{html.escape(o.log)}">log</a>' if o.log else ""
            cells.append(f'<td class="{o.status}">{text}{wheels}{why}{log}</td>')
        rows.append(f"<tr><th>{html.escape(package.name)}</th>{''.join(cells)}</tr>")
    progress = (
        ""
        if running is None
        else f"<p>Running: {running[0]} of {running[1]} jobs done (this page follows the run).</p>"
    )
    page = (
        '<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>archguard farm</title>'
        "<style>td,th{border:1px solid #999;padding:4px;vertical-align:top}"
        "ul.facts{margin:2px 0;padding-left:16px;font-size:90%}"
        ".built,.kept,.served{background:#dfd}.failed{background:#fdd}.skipped{background:#eee}"
        ".sha{font-size:75%;color:#555}</style>"
        f"</head><body><h1>archguard farm: {html.escape(str(manifest.path.name))}</h1>{progress}"
        f"{_usage_html(site)}"
        f"<table><tr><th>package</th>{head}</tr>{''.join(rows)}</table>"
        f"{_install_commands(site, manifest)}{finder_html(data) if data else ''}</body></html>\n"
    )
    write_atomic(site / "index.html", page)


def _usage_html(site: Path) -> str:
    """The machine's use in the last run that built anything (``farm run``'s summary line)."""
    try:
        line = json.loads((site / USAGE).read_text())["line"]
    except (OSError, ValueError, KeyError, TypeError):
        return ""
    return f'<p class="usage">Last run that built: {html.escape(str(line))}</p>'


def install_command(site: Path, cell: Cell, name: str = "NAME") -> list[str]:
    """The command that installs ``name`` from the cell's index in a fresh environment: the
    cell's own torch index first (its torch is not on the site), the site's index after it
    (where only it holds the package's wheels). The same options work for ``pip install``
    and ``uv pip install``."""
    argv = ["pip", "install"]
    if cell.index_url:
        argv.append(f"--index-url={cell.index_url}")
    argv += [f"--extra-index-url={u}" for u in cell.extra_index_urls]
    argv.append(f"--extra-index-url={(site.resolve() / cell.name / 'simple').as_uri()}")
    return [*argv, name]


def _install_commands(site: Path, manifest: Manifest) -> str:
    rows = "".join(
        f"<li>{html.escape(cell.name)}: <code>{html.escape(' '.join(install_command(site, cell)))}"
        "</code></li>"
        for cell in manifest.cells
    )
    return (
        "<p>Install from a cell's index (its torch comes from the cell's torch index, the "
        "package from the farm's; <code>uv pip install</code> takes the same options):</p>"
        f"<ul>{rows}</ul>"
    )
