"""``archguard matrix``: the P.A.M page, every (CUDA, torch) cell in the bundled tables.

For each cell: the effective list, what was dropped and why, the coverage tier of every
known device, and beside it whether torch itself can run there. Exclusions are computed
and printed, never implied (CW-ADR-0012). Formats: text, markdown, JSON, a GitHub Actions
matrix (``include:`` entries for ``fromJSON``) and a self-contained HTML page.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass

from archguard import __version__
from archguard.core.arch import format_list
from archguard.core.coverage import Tier, known_devices, runs_on
from archguard.core.cuda import CudaVersion
from archguard.core.formats import MatrixFormat
from archguard.core.platform import DEFAULT_PLATFORM, Platform
from archguard.core.policy import Policy
from archguard.core.resolve import Resolution
from archguard.core.toolkit import bundled_toolkit
from archguard.core.torchbuild import bundled_builds
from archguard.errors import ArchguardError, NotRepresentable
from archguard.nvcc.flags import cmake_architectures, gencode_flags, torch_arch_list
from archguard.settings.inputs import Settings

MATRIX_SCHEMA = "archguard.matrix/1"
GITHUB_SCHEMA = "archguard.github-matrix/1"


@dataclass(frozen=True)
class Combo:
    version: CudaVersion
    torch: str
    resolution: Resolution | None
    error: ArchguardError | None
    platform: Platform = DEFAULT_PLATFORM

    @property
    def cuda(self) -> str:
        return self.version.text

    @property
    def tag(self) -> str:
        return self.version.tag


def compute(settings: Settings, platform: Platform = DEFAULT_PLATFORM) -> list[Combo]:
    """Every bundled (CUDA, torch) cell of ``platform`` resolved with the same settings
    (policy, package, and ``ARCHGUARD_ARCH_LIST`` when set), exactly as ``list`` resolves one
    cell."""
    cells = []
    for build in bundled_builds():
        if build.platform != platform:
            continue
        try:
            res = settings.resolve(bundled_toolkit(build.cuda), build.build)
        except ArchguardError as exc:  # e.g. no policy row for this CUDA
            cells.append(Combo(build.cuda, build.torch, None, exc, platform))
            continue
        error = None
        try:
            res.require_cubins()
        except ArchguardError as exc:
            error = exc
        cells.append(Combo(build.cuda, build.torch, res, error, platform))
    return cells


def _dropped(res: Resolution) -> list[dict[str, str]]:
    return [{"arch": str(d.arch), "step": d.step.value, "reason": d.reason} for d in res.dropped()]


def override_note(settings: Settings) -> str | None:
    """The header line that says an ``ARCHGUARD_ARCH_LIST`` applies to every cell."""
    if settings.override is None:
        return None
    entries, variable = settings.override
    return (
        f"{variable}={format_list(entries)} applies to every cell (as it does to `archguard "
        "list` and to builds), still clamped per cell; unset it to see the policy's rows."
    )


def _tiers(res: Resolution) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {t.value: [] for t in Tier}
    for c in res.coverage():
        out[c.tier.value].append(c.device.cc_text)
    return out


def as_json(cells: list[Combo], settings: Settings) -> dict[str, object]:
    policy = settings.policy
    override = settings.override
    return {
        "schema": MATRIX_SCHEMA,
        "archguard": __version__,
        "policy": {"source": policy.source, "sha256": policy.digest or None},
        "override": (
            {"variable": override[1], "list": format_list(override[0])} if override else None
        ),
        "devices": [{"cc": d.cc_text, "name": d.name} for d in known_devices()],
        "combos": [
            {
                "cuda": c.cuda,
                "cuda_tag": c.tag,
                "torch": c.torch,
                "platform": c.platform,
                "ok": c.error is None,
                "error": str(c.error) if c.error else None,
                "effective": c.resolution.effective_text if c.resolution else None,
                "entries": [str(e) for e in c.resolution.effective] if c.resolution else [],
                "dropped": _dropped(c.resolution) if c.resolution else [],
                "coverage": [
                    {
                        "cc": cov.device.cc_text,
                        "tier": cov.tier.value,
                        "via": cov.via,
                        "torch_runs": runs_on(c.resolution.torch.targets, cov.device.cc),
                    }
                    for cov in c.resolution.coverage()
                ]
                if c.resolution
                else [],
            }
            for c in cells
        ],
    }


def as_github(cells: list[Combo]) -> dict[str, object]:
    include = []
    for c in cells:
        if c.resolution is None or c.error is not None:
            continue
        try:
            torch_list: str | None = torch_arch_list(c.resolution.effective)
        except NotRepresentable:
            torch_list = None
        include.append(
            {
                "cuda": c.cuda,
                "cuda_tag": c.tag,
                "torch": c.torch,
                "platform": c.platform,
                "arch_list": c.resolution.effective_text,
                "torch_cuda_arch_list": torch_list,
                "cmake_cuda_architectures": cmake_architectures(c.resolution.effective),
                "gencode": " ".join(gencode_flags(c.resolution.effective)),
                "archguard_schema": GITHUB_SCHEMA,
            }
        )
    return {"include": include}


def _no_torch(res: Resolution) -> list[str]:
    """Devices this torch itself cannot run on, whatever the wheel holds."""
    return [c.device.cc_text for c in res.torch_coverage() if c.tier is Tier.DEAD]


def _short_drops(res: Resolution) -> str:
    return ", ".join(f"{d.arch} ({d.step})" for d in res.dropped()) or "-"


COLUMNS = (
    "cuda",
    "torch",
    "effective list",
    "dropped (step)",
    "jit-only",
    "dead",
    "torch cannot run",
)


def _summary(c: Combo, sep: str) -> tuple[str, ...]:
    """One cell's columns for the text and markdown tables; device lists joined by ``sep``."""
    assert c.resolution is not None
    t = _tiers(c.resolution)
    return (
        c.tag,
        c.torch,
        c.resolution.effective_text,
        _short_drops(c.resolution),
        sep.join(t["jit-only"]) or "-",
        sep.join(t["dead"]) or "-",
        sep.join(_no_torch(c.resolution)) or "-",
    )


def _platform_note(cells: list[Combo]) -> list[str]:
    """The header line naming a platform other than x86_64 (the page is one platform's)."""
    other = sorted({c.platform for c in cells} - {DEFAULT_PLATFORM})
    return [f"platform: {', '.join(other)} (PyTorch's builds for it)"] if other else []


def as_text(cells: list[Combo], settings: Settings) -> str:
    note = override_note(settings)
    rows: list[tuple[str, ...]] = [COLUMNS]
    errors = []
    for c in cells:
        if c.resolution is None or c.error is not None:
            errors.append(f"{c.tag:<6} {c.torch:<6} ERROR: {c.error}")
        else:
            rows.append(_summary(c, " "))
    widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS))]
    lines = ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    header = _platform_note(cells) + ([f"note: {note}"] if note else [])
    return "\n".join(header + lines + errors) + "\n"


def as_markdown(cells: list[Combo], policy: Policy, settings: Settings) -> str:
    note = override_note(settings)
    lines = [
        f"# archguard matrix (archguard {__version__})",
        "",
        f"Policy: {policy.source}",
        "",
        *[f"{line[0].upper()}{line[1:]}" for line in _platform_note(cells)],
        *([""] if _platform_note(cells) else []),
        *([f"**Override:** {note}", ""] if note else []),
        "| CUDA | torch | effective list | dropped (step) | JIT-only | dead | torch cannot run |",
        "|---|---|---|---|---|---|---|",
    ]
    for c in cells:
        if c.resolution is None or c.error is not None:
            lines.append(f"| {c.tag} | {c.torch} | **error**: {c.error} | | | | |")
            continue
        row = list(_summary(c, ", "))
        row[2] = f"`{row[2]}`"
        lines.append("| " + " | ".join(row) + " |")
    lines += [
        "",
        "Tiers are over the known devices: native (a cubin serves it), JIT-only "
        '(only a PTX net reaches it), dead (nothing does). "torch cannot run" lists the '
        "devices the cell's torch itself cannot run on, whatever the wheel holds.",
    ]
    return "\n".join(lines) + "\n"


_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#1b1f24;background:#fff}
h1{font-size:20px;margin:0 0 4px}p{margin:4px 0 12px;color:#444}
table{border-collapse:collapse}th,td{border:1px solid #d0d7de;padding:3px 6px;text-align:center}
th{background:#f3f4f6;font-weight:600}th.dev{writing-mode:vertical-rl;transform:rotate(180deg);
white-space:nowrap;font-weight:500;font-size:12px}td.list{font-family:ui-monospace,monospace;
text-align:left;white-space:nowrap}td.drop{text-align:left;font-size:12px;max-width:260px}
td.native{background:#2da44e;color:#fff}td.jit-only{background:#d4a72c;color:#000}
td.dead{background:#cf222e;color:#fff}td.notorch{background-image:repeating-linear-gradient(
45deg,rgba(255,255,255,.45) 0 3px,transparent 3px 7px)}td.err{background:#ffebe9;text-align:left}
.legend span{display:inline-block;padding:2px 8px;margin-right:6px;border-radius:3px}
"""


def as_html(cells: list[Combo], policy: Policy, settings: Settings) -> str:
    note = override_note(settings)
    devices = known_devices()
    e = html.escape
    head = "".join(
        f'<th class="dev" title="{e(d.name)}">{e(d.cc_text)} {e(d.name)}</th>' for d in devices
    )
    rows = []
    for c in cells:
        if c.resolution is None or c.error is not None:
            rows.append(
                f"<tr><td>{e(c.tag)}</td><td>{e(c.torch)}</td>"
                f'<td class="err" colspan="{len(devices) + 2}">{e(str(c.error))}</td>'
                "</tr>"
            )
            continue
        res = c.resolution
        tds = []
        for cov in res.coverage():
            torch_ok = runs_on(res.torch.targets, cov.device.cc)
            mark = {"native": "N", "jit-only": "J", "dead": "-"}[cov.tier.value]
            title = (
                f"{cov.device}: {cov.tier.value}"
                + (f" via {cov.via}" if cov.via else "")
                + ("" if torch_ok else f"; {res.torch.label} itself cannot run here")
            )
            klass = cov.tier.value + ("" if torch_ok else " notorch")
            tds.append(
                f'<td class="{klass}" title="{e(title)}">{mark}'
                f"{'' if torch_ok else '&#x2715;'}</td>"
            )
        drops = "; ".join(f"{d.arch} ({d.step})" for d in res.dropped()) or "-"
        drop_title = "\n".join(f"{d.arch} ({d.step}): {d.reason}" for d in res.dropped())
        rows.append(
            f"<tr><td>{e(c.tag)}</td><td>{e(c.torch)}</td>"
            f'<td class="list">{e(res.effective_text)}</td>'
            f'<td class="drop" title="{e(drop_title)}">{e(drops)}</td>{"".join(tds)}'
            "</tr>"
        )
    override_html = f"<p><strong>Override:</strong> {e(note)}</p>\n" if note else ""
    platform_html = "".join(f"; {line}" for line in _platform_note(cells))
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>archguard matrix</title><style>{_CSS}</style></head><body>
<h1>archguard matrix: CUDA arch coverage per farm cell</h1>
<p>archguard {e(__version__)}; policy: {e(policy.source)}{e(platform_html)}. One row per
(CUDA, torch) cell, one column per known device. Hover a cell for its reason.</p>
{override_html}<p class="legend"><span style="background:#2da44e;color:#fff">N native</span>
<span style="background:#d4a72c">J JIT-only (PTX)</span>
<span style="background:#cf222e;color:#fff">- dead</span>
<span style="background:#888;color:#fff">&#x2715; torch itself cannot run there</span></p>
<table><thead><tr><th>CUDA</th><th>torch</th><th>effective list</th><th>dropped</th>{head}</tr>
</thead><tbody>
{chr(10).join(rows)}
</tbody></table></body></html>
"""


def render(cells: list[Combo], settings: Settings, fmt: MatrixFormat) -> str:
    """The page in one of: text, markdown, html, json, github."""
    policy = settings.policy
    if fmt == "json":
        return json.dumps(as_json(cells, settings), indent=2) + "\n"
    if fmt == "github":
        return json.dumps(as_github(cells), separators=(",", ":")) + "\n"
    if fmt == "markdown":
        return as_markdown(cells, policy, settings)
    if fmt == "html":
        return as_html(cells, policy, settings)
    return as_text(cells, settings)
