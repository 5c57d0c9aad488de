"""One resolution per build: gathered the one way in (:mod:`archguard.settings.inputs`), logged,
checked for emptiness, and kept on the Distribution for every command of the build, with
what the build did per extension (for the record and the check after the build)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from setuptools.errors import SetupError

from archguard._integration.common import announce_once, project_root, say
from archguard.binaries.record import BuildFacts
from archguard.core.modes import DEFAULT_ARCH_SPECIFIC, ArchSpecific, Check
from archguard.core.resolve import Resolution
from archguard.errors import ArchguardError
from archguard.nvcc.flags import arch_variables
from archguard.reports.text import build_log_lines, render_error
from archguard.settings.config import (
    ENV_VERIFY,
    env_choice,
    env_disabled,
)
from archguard.settings.inputs import Query, gather
from archguard.settings.model import PackageConfig


@dataclass(kw_only=True)
class Session(BuildFacts):
    """One resolution per Distribution (a process may build several extensions), and what
    its build records (:class:`archguard.binaries.record.BuildFacts`)."""

    resolution: Resolution
    package: PackageConfig | None

    @property
    def arch_specific(self) -> ArchSpecific:
        return self.package.hardcoded_arch_specific if self.package else DEFAULT_ARCH_SPECIFIC

    def verify_mode(self) -> Check | None:
        """ARCHGUARD_VERIFY, then [tool.archguard] verify; None: the default."""
        chosen = cast("Check | None", env_choice(os.environ, ENV_VERIFY, "verify"))
        if chosen is None and self.package is not None:
            chosen = self.package.verify
        return chosen


def setup_error(exc: ArchguardError) -> Exception:
    """setuptools reports a SetupError raised in a command as one clean ``error:`` line."""
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
    carried = arch_variables(res.effective)
    torch_text = carried.values.get("TORCH_CUDA_ARCH_LIST")
    cudaarchs = carried.values["CUDAARCHS"]
    if torch_text is None:
        say(
            f"TORCH_CUDA_ARCH_LIST is unset for this build: torch cannot express "
            f"{'; '.join(carried.unspellable)}; "
            "archguard passes the -gencode flags to nvcc itself"
        )
    if carried.families:
        say(
            f"CUDAARCHS={cudaarchs} holds family targets "
            f"({', '.join(carried.families)}): CMake 4.4 reads the 'f' suffix, CMake "
            "3.25 stops with 'is not one of the following'; archguard puts the -gencode "
            "flags on the nvcc lines it can see itself"
        )
    session = Session(
        torch_text,
        cudaarchs,
        dict(gathered.shown),
        getattr(dist, "_archguard_activation", "package"),
        resolution=res,
        package=gathered.settings.package,
    )
    dist._archguard_session = session
    return session
