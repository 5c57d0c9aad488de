"""Before compiling: the stub lint over each CUDA extension's sources, with that
extension's own targets (:mod:`archguard.lint.guards`).

``[tool.archguard] lint = "warn" | "error" | "off"`` (default ``warn``) chooses whether
findings stop the build; ``ARCHGUARD_LINT`` overrides it. Headers are followed through the
extension's include directories inside the project (not torch's or the toolkit's).
"""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path
from typing import Any, cast

from archguard._integration.common import announce_once, project_root, say
from archguard._integration.session import Session, setup_error
from archguard.core.modes import DEFAULT_LINT, Check
from archguard.errors import ArchguardError, StubHazard
from archguard.lint.guards import Report, Wheel, analyse
from archguard.lint.render import list_place, relative, text_lines
from archguard.lint.sources import Sources, include_dirs_of, include_flags, parse_defines
from archguard.nvcc.plan import ExtensionPlan
from archguard.settings.config import ENV_LINT, env_choice, env_lint_budget


def lint_mode(session: Session) -> Check:
    try:
        chosen = cast("Check | None", env_choice(os.environ, ENV_LINT, "lint"))
    except ArchguardError as exc:
        raise setup_error(exc) from None
    if chosen is None and session.package is not None:
        chosen = session.package.lint
    return chosen or DEFAULT_LINT


def lint_budget() -> float:
    """ARCHGUARD_LINT_BUDGET (seconds per extension), else the default."""
    try:
        return env_lint_budget(os.environ)
    except ArchguardError as exc:
        raise setup_error(exc) from None


def lint_build(
    cmd: Any, session: Session, planned: list[tuple[Any, dict[str, list[str]], ExtensionPlan]]
) -> dict[str, dict[str, str]]:
    """Lint each extension for its planned targets; returns, per extension, the targets for
    which an ``#error`` is proved reached (target -> the ``#error`` and where): the build
    drops them before compiling (:func:`archguard.nvcc.plan.plan_extension`).

    The lint is archguard's own reading, never a decision: an extension whose sources or
    flags it cannot read (an exception of its own) is named in a warning and the build goes
    on with its planned targets; only a decision (``lint = "error"`` with hazards found)
    stops it."""
    proofs: dict[str, dict[str, str]] = {}
    mode = lint_mode(session)
    if mode == "off" or not planned:
        if mode == "off":
            say("lint: off ([tool.archguard] lint or ARCHGUARD_LINT)")
        return proofs
    root = Path(project_root(cmd.distribution)).resolve()
    budget = lint_budget()
    hazards = 0
    for ext, args, plan in planned:
        try:
            report = _lint_extension(ext, args, plan, session, (root, budget))
        except ArchguardError:
            raise
        except Exception as exc:  # archguard's own reading failed: not a decision
            sources = [str(s) for s in ext.sources if str(s).endswith(".cu")]
            say(
                f"warning: lint: extension {ext.name}: archguard's lint could not read its "
                f"sources or flags ({', '.join(sources[:3])}"
                f"{' and more' if len(sources) > 3 else ''}: {type(exc).__name__}: "
                f"{str(exc)[:200]}); no lint for it, and it builds with "
                f"{' '.join(plan.targets.names())} as planned"
            )
            continue
        if report is None:
            continue
        hazards += len(report.findings)  # a proved #error drops its targets instead
        for error in report.errors:
            where = f"{relative(error.file, root)}:{error.line}"
            for image in error.images:
                proofs.setdefault(ext.name, {})[image] = f"{error.text!r} ({where})"
    if hazards and mode == "error":
        raise setup_error(
            StubHazard(
                f"the stub lint found {hazards} hazard{'s' if hazards != 1 else ''} (listed "
                "above): guarded code that a served device runs compiled out, and "
                "[tool.archguard] lint = 'error' (ARCHGUARD_LINT). Add "
                "the arches each line names, or set lint = 'warn'."
            )
        )
    return proofs


def _lint_extension(
    ext: Any,
    args: dict[str, list[str]],
    plan: ExtensionPlan,
    session: Session,
    where: tuple[Path, float],
) -> Report | None:
    """Lint one extension's .cu sources and say what it found; None when it has none."""
    root, budget = where
    sources = [str((root / s).resolve()) for s in ext.sources if str(s).endswith(".cu")]
    if not sources:
        return None
    nvcc_flags = [str(f) for f in args.get("nvcc", [])]
    flag_dirs, forced = include_flags(nvcc_flags, root)
    dirs = [root / d for d in getattr(ext, "include_dirs", []) or []] + flag_dirs
    inside_dirs = [d.resolve() for d in dirs if d.resolve().is_relative_to(root)]
    defines = parse_defines(
        [*nvcc_flags, *(f"-U{name}" for name in getattr(ext, "undef_macros", None) or [])],
        list(getattr(ext, "define_macros", None) or []),
    )
    reading = Sources.on_disk(
        [*inside_dirs, *include_dirs_of(root)],
        [root],
        defines,
        [f for f in forced if Path(f).is_relative_to(root)],
        budget,
    )
    res = session.resolution
    linting = time.monotonic()
    report = analyse(sources, Wheel(plan.targets, res.toolkit, res.torch.targets), reading)
    took = f"{time.monotonic() - linting:.1f} s"
    session.linted[ext.name] = _record(report, root)
    for name, value in report.opaque.items():  # said once per build
        announce_once(
            f"lint-opaque:{name}={value}",
            f"lint: -D{name}={value!r} is not an expression the lint reads: it takes {name} "
            "as defined to an unknown value (a condition on it stays undecided, never a proof)",
        )
    if report.ok and not report.not_understood and not report.unfinished:
        say(f"lint: extension {ext.name}: no stub hazard in {report.files} files ({took})")
        return report
    say(f"lint: extension {ext.name}: {report.files} files read ({took})")
    said = dataclasses.replace(report, opaque={})  # (said above, once)
    for line in text_lines(said, list_place(res.request.origin, res.tag), root)[1:]:
        if line:
            say(f"lint: extension {ext.name}: {line.strip()}")
    return report


def _record(report: Report, root: Path) -> dict[str, Any]:
    """What the build's record keeps of one extension's lint."""
    return {
        "findings": len(report.findings),
        "dead": len(report.dead),
        "errors_reached": len(report.errors),
        "not_understood": len(report.not_understood),
        # each hazard by device and the image it loads: doctor reads them where the
        # build could not disassemble the kernels (no nvdisasm, ARCHGUARD_STUBS=0)
        "hazards": [
            {
                "file": relative(f.file, root),
                "line": f.line,
                "guard": f.guard,
                "device": f.device.cc_text,
                "image": f.image.split(" ", 1)[0],
                "kind": f.kind,
                "fix": str(f.fix),
            }
            for f in report.findings
        ],
    }
