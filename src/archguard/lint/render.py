"""``archguard lint``'s output and the build log's lint lines: text or JSON."""

from __future__ import annotations

import json
from pathlib import Path

from archguard.core.formats import Format
from archguard.lint.guards import Finding, Report

LINT_SCHEMA = "archguard.lint/1"


def relative(file: str, base: Path | None) -> str:
    path = Path(file)
    if base is not None and path.resolve().is_relative_to(base.resolve()):
        path = path.resolve().relative_to(base.resolve())
    return str(path)


def _where(file: str, line: int, base: Path | None) -> str:
    return f"{relative(file, base)}:{line}"


def list_place(origin: str, tag: str) -> str:
    """Where a fix goes: the place the list came from (``Request.origin``: the environment
    variable, a package's or a farm's ``[tool.archguard]`` key, a policy row), so that the fix
    line names what the person really edits."""
    if origin.startswith("policy row"):
        return (
            f"the list ({origin}: override it with [tool.archguard] arch_list_by_cuda.{tag}, "
            "a farm's ARCHGUARD_CONFIG, or ARCHGUARD_ARCH_LIST)"
        )
    return origin


def render(report: Report, place: str, fmt: Format = "text", base: Path | None = None) -> str:
    """``archguard lint``'s output (and the build log's lint lines), text or json. ``place``:
    where the list came from (:func:`list_place`), named by each fix."""
    if fmt == "json":

        def at(file: str, line: int, **rest: object) -> dict[str, object]:
            return {"file": relative(file, base), "line": line, **rest}

        data = {
            "schema": LINT_SCHEMA,
            "ok": report.ok,
            "targets": report.targets,
            "files": report.files,
            "findings": [
                at(
                    f.file,
                    f.line,
                    guard=f.guard,
                    device=f.device.cc_text,
                    device_name=f.device.name,
                    image=f.image,
                    kind=f.kind,
                    torch_runs=f.torch_runs,
                    fix=str(f.fix),
                    **({"used_at": _used_at(f.used_at, base)} if f.used_at else {}),
                )
                for f in report.findings
            ],
            "dead": [at(d.file, d.line, guard=d.guard, needs=list(d.needs)) for d in report.dead],
            "errors_reached": [
                at(e.file, e.line, text=e.text, images=list(e.images)) for e in report.errors
            ],
            "not_understood": [at(f, n, why=t) for f, n, t in report.not_understood],
            "opaque_defines": report.opaque,
            "skipped": report.skipped,
            "not_scanned": report.not_scanned,
            "vendored_not_linted": [relative(v, base) for v in report.vendored],
        }
        return json.dumps(data, indent=2) + "\n"
    return "\n".join(text_lines(report, place, base)) + "\n"


def text_lines(report: Report, place: str, base: Path | None = None) -> list[str]:
    out = [f"archguard lint: {report.files} files read, for a wheel holding {report.targets}"]
    out += _hazard_lines(report, place, base)
    out += _other_lines(report, base)
    out += [
        "",
        f"result: {'OK' if report.ok else 'FINDINGS'} ({len(report.findings)} stub "
        f"hazard{'s' if len(report.findings) != 1 else ''}, {len(report.errors)} #error "
        "reached)",
    ]
    return out


def _hazard_lines(report: Report, place: str, base: Path | None) -> list[str]:
    out: list[str] = []
    groups: dict[tuple[str, int, str], list[Finding]] = {}
    for f in sorted(report.findings, key=lambda f: (f.file, f.line, f.device.cc)):
        groups.setdefault((f.file, f.line, f.guard), []).append(f)
    out += ["", f"Stub hazards ({len(report.findings)}): code a served device runs compiled out"]
    if not groups:
        out.append("  none")
    for (file, line, guard), items in groups.items():
        out.append(f"  {_where(file, line, base)}  {guard}")
        for f in items:
            torch = {True: "torch runs there", False: "torch itself cannot run there", None: ""}[
                f.torch_runs
            ]
            out.append(
                f"    {f.device} loads {f.image}, {_what(f, base)}; "
                f"{torch}; fix: add {f.fix} to {place}"
            )
    return out


def _what(f: Finding, base: Path | None) -> str:
    """What the loaded image does with the region, by kind."""
    if f.kind == "missing-kernel":
        return (
            "whose device pass compiles out what the host pass keeps: the kernels defined or "
            "launched here are not in that image (missing kernel: a launch there fails)"
        )
    if f.kind == "value":
        return f"where this constexpr value differs (value, used at {_used_at(f.used_at, base)})"
    return f"which compiles it out ({f.kind} instead)"


def _used_at(used_at: str, base: Path | None) -> str:
    file, _, line = used_at.rpartition(":")
    return _where(file, int(line), base)


def _other_lines(report: Report, base: Path | None) -> list[str]:
    out: list[str] = []
    if report.errors:
        out += ["", "#error reached (that build will fail)"]
        for e in report.errors:
            out.append(f"  {_where(e.file, e.line, base)}  {e.text}  (by {', '.join(e.images)})")
    if report.dead:
        out += ["", "Dead for this wheel (no target in the list compiles it)"]
        for d in report.dead:
            needs = f" (compiled for {', '.join(d.needs)})" if d.needs else ""
            out.append(f"  {_where(d.file, d.line, base)}  {d.guard}{needs}")
    if report.not_understood:
        out += ["", "Not understood (not evaluated; check by hand)"]
        for file, line, why in report.not_understood:
            out.append(f"  {_where(file, line, base)}  {why}")
    if report.opaque:
        out += ["", "Opaque -D values (not expressions: defined, their values taken as unknown)"]
        out += [f"  -D{name}={value!r}" for name, value in sorted(report.opaque.items())]
    if report.skipped:
        out += ["", "Skipped (unreadable)"]
        out += [f"  {path}: {why}" for path, why in sorted(report.skipped.items())]
    if report.vendored:
        where = sorted({str(Path(relative(v, base)).parent) for v in report.vendored})
        shown = ", ".join(where[:3]) + (f" and {len(where) - 3} more" if len(where) > 3 else "")
        out += [
            "",
            f"Not linted: {len(report.vendored)} .cu files under vendored directories "
            f"({shown}); their headers are read where the package includes them (name a "
            "file to lint it)",
        ]
    if report.unfinished:
        out += [
            "",
            f"Not scanned: the lint's budget ({report.seconds:.1f} s) ran out before "
            + ", ".join(relative(f, base) for f in report.unfinished)
            + " (raise it with ARCHGUARD_LINT_BUDGET=SECONDS)",
        ]
    if report.not_scanned:
        shown = ", ".join(report.not_scanned[:6])
        more = f" and {len(report.not_scanned) - 6} more" if len(report.not_scanned) > 6 else ""
        out += [
            "",
            f"Not scanned: {len(report.not_scanned)} includes outside the package "
            f"(toolkit, torch, system): {shown}{more}",
        ]
    return out
