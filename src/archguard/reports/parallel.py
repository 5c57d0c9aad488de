"""What a build here would choose for nvcc ``--threads`` and parallel jobs, previewed for
``explain`` before any build: the same reading of the settings and the same rule as the build
(:func:`archguard.nvcc.parallel.decided_parallelism`), with what setup.py shows read, never run.
"""

from __future__ import annotations

import ast
import re
import shutil
from collections.abc import Mapping
from pathlib import Path

from archguard.core.resolve import Resolution
from archguard.detect.machine import detect_machine
from archguard.detect.sources import CUDA_SOURCES, CXX_SOURCES, tree_files
from archguard.nvcc.flags import gencode_flags, threads_flag
from archguard.nvcc.parallel import (
    CHOSEN,
    BuildMode,
    Decided,
    RunsAs,
    Workload,
    asked,
    decided_parallelism,
    device_compiles,
)
from archguard.settings.config import jobserver_setting
from archguard.settings.inputs import Settings


def count_sources(root: Path) -> tuple[int, int]:
    """(.cu, C/C++) files under a project (:func:`archguard.detect.sources.tree_files`):
    what explain can know before a build about its compile jobs."""
    cu = cxx = 0
    for name in tree_files(root):
        cu += name.endswith(CUDA_SOURCES)
        cxx += name.endswith(CXX_SOURCES)
    return cu, cxx


def _setup_py(root: Path) -> str:
    """The project's setup.py as text ("" when there is none or it cannot be read)."""
    setup = root / "setup.py"
    try:
        return setup.read_text(encoding="utf-8", errors="replace") if setup.is_file() else ""
    except OSError:
        return ""


def _preview_mode(text: str) -> tuple[BuildMode, str]:
    """The build mode a build here will run in, as far as setup.py (``text``) and the
    machine show before it."""
    for number, line in enumerate(text.splitlines(), 1):
        if re.search(r"use_ninja\s*=\s*False", line):
            return BuildMode.SERIAL, f"use_ninja=False, setup.py:{number}"
    if shutil.which("ninja") is None:
        return BuildMode.SERIAL, "ninja is not installed: torch falls back to setuptools"
    return BuildMode.NINJA, "torch's BuildExtension with ninja"


def _setup_py_threads(text: str) -> Decided | None:
    """The ``--threads N`` / ``-t N`` that the flag lists written in setup.py give nvcc,
    read (never run) through the build's own parser
    (:func:`archguard.nvcc.flags.threads_flag`), so that explain names the decider the build
    will name. A list assembled at run time is not seen."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # a hostile setup.py
        return None
    found: list[tuple[int, tuple[int, str]]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.List | ast.Tuple):
            words = [
                e.value
                for e in node.elts
                if isinstance(e, ast.Constant) and isinstance(e.value, str)
            ]
            hit = threads_flag(words)
            if hit is not None:
                found.append((node.lineno, hit))
    if not found:
        return None
    line, (value, written) = min(found)
    origin = f"setup.py:{line}'s nvcc flags ({written!r})"
    if len({hit[0] for _, hit in found}) > 1:
        origin += "; other lists there give other values: the build decides per extension"
    return Decided(value, origin)


def parallel_preview(settings: Settings, res: Resolution, environ: Mapping[str, str]) -> str:
    """What a build here would choose for nvcc --threads and parallel jobs (explain): the
    same reading of the settings and the same rule as the build
    (:func:`archguard.nvcc.parallel.decided_parallelism`)."""
    cu, cxx = count_sources(settings.project.root)
    setup_py = _setup_py(settings.project.root)  # read once, never run
    chosen = asked(environ, settings.package, _setup_py_threads(setup_py))
    mode, mode_from = _preview_mode(setup_py)
    choice = decided_parallelism(
        detect_machine(),
        Workload(cu, cxx, device_compiles(gencode_flags(res.effective))),
        chosen,
        RunsAs(mode, mode_from),
    )
    ignored = "".join(f" Warning: {w}." for w in chosen.warnings)
    joined = ""
    if mode is BuildMode.NINJA and choice.jobs_chosen and jobserver_setting(environ).on:
        joined = (
            " With the jobserver (the default; ARCHGUARD_JOBSERVER=0 for none), a build whose "
            "ninja is 1.13 or later takes a token per compile from one jobserver of a token "
            "per core instead, and each nvcc compile "
            + (
                "--threads 1 + the free tokens, at most its device compiles."
                if choice.threads_from == CHOSEN
                else f"keeps --threads {choice.threads} ({choice.threads_from})."
            )
        )
    return (
        f"Build parallelism here: {choice.summary}, from {choice.why} (sources counted under "
        f"{settings.project.root}; the build decides per extension, and a --threads on an "
        f"extension's own nvcc line wins).{ignored}{joined}"
    )
