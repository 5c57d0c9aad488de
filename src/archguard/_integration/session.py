"""One resolution per build: gathered the one way in (:mod:`archguard.inputs`), logged,
checked for emptiness, and kept on the Distribution for every command of the build."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from archguard._integration.common import announce_once, project_root, say
from archguard.config import env_disabled
from archguard.errors import ArchguardError, NotRepresentable
from archguard.flags import torch_arch_list
from archguard.inputs import Query, gather
from archguard.report import build_log_lines, render_error
from archguard.resolve import Resolution


@dataclass
class Session:
    """One resolution per Distribution (a process may build several extensions)."""

    resolution: Resolution
    torch_arch_list: str | None
    replaced: str | None = None  # a TORCH_CUDA_ARCH_LIST the environment had set
    extensions: list[dict[str, object]] = field(default_factory=list)


def setup_error(exc: ArchguardError) -> Exception:
    """setuptools reports a SetupError raised in a command as one clean ``error:`` line."""
    from setuptools.errors import SetupError  # noqa: PLC0415

    error: Exception = SetupError(render_error(exc))
    return error


def session_for(dist: Any) -> Session | None:
    """Resolve for this distribution (once), or None when ARCHGUARD_DISABLE is on."""
    cached = getattr(dist, "_archguard_session", None)
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    try:
        if env_disabled(os.environ):
            announce_once(
                "disabled",
                f"disabled by ARCHGUARD_DISABLE="
                f"{os.environ['ARCHGUARD_DISABLE']}: building without "
                "an arch policy",
            )
            return None
        gathered = gather(Query(project_dir=Path(project_root(dist))))
        res = gathered.resolve()
        for line in build_log_lines(res, gathered.shown, gathered.warnings):
            say(line)
        res.require_cubins()
    except ArchguardError as exc:
        raise setup_error(exc) from None
    try:
        torch_text: str | None = torch_arch_list(res.effective)
    except NotRepresentable as exc:
        torch_text = None
        say(
            f"TORCH_CUDA_ARCH_LIST is unset for this build: torch cannot express "
            f"{'; '.join(exc.problems)}; "
            "archguard passes the -gencode flags to nvcc itself"
        )
    session = Session(res, torch_text)
    dist._archguard_session = session
    return session
