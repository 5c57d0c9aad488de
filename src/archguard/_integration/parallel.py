"""How a build's compiles share the cores: the parallel jobs and nvcc ``--threads`` chosen per
extension (:func:`archguard.nvcc.parallel.decided_parallelism`, which ``explain`` calls too).
The jobserver the build's ninja and nvcc take their tokens from is
:mod:`archguard._integration.jobserver`.
"""

from __future__ import annotations

import os
from typing import Any

from archguard._integration.common import is_torch_build_extension, say
from archguard._integration.session import Session
from archguard.detect.machine import detect_machine
from archguard.detect.sources import CUDA_SOURCES, CXX_SOURCES
from archguard.nvcc.flags import threads_flag
from archguard.nvcc.parallel import (
    BuildMode,
    Choice,
    Decided,
    RunsAs,
    Workload,
    asked,
    decided_parallelism,
    device_compiles,
)


def build_mode(cmd: Any) -> tuple[BuildMode, str]:
    """How this build_ext compiles: torch's BuildExtension with ninja, or setuptools' one
    source at a time (``use_ninja=False``; torch also falls back to it when ninja is not
    installed, and says so), read from the command itself."""
    if not is_torch_build_extension(type(cmd)):
        return BuildMode.SERIAL, f"{type(cmd).__name__} is setuptools' build_ext"
    if getattr(cmd, "use_ninja", True):
        return BuildMode.NINJA, "torch's BuildExtension with ninja"
    return BuildMode.SERIAL, "use_ninja=False, or ninja is not installed"


def choose_parallelism(
    cmd: Any, session: Session, planned: list[tuple[Any, dict[str, list[str]], Any]]
) -> dict[str, Choice]:
    """nvcc --threads and the parallel jobs, per extension and for the mode it really builds
    in, unless the user, the package or its [tool.archguard] decided (MAX_JOBS,
    NVCC_THREADS, --threads on its nvcc line): :func:`archguard.nvcc.parallel.decided_parallelism`,
    which ``explain`` calls too."""

    mode, mode_from = build_mode(cmd)
    parallel = getattr(cmd, "parallel", None)
    sharing = 1
    if isinstance(parallel, int) and parallel > 1 and len(planned) > 1:
        sharing = min(parallel, len(planned))
        mode_from += f"; build_ext --parallel {parallel} builds {sharing} extensions at once"
    machine = detect_machine()
    out: dict[str, Choice] = {}
    warned: set[str] = set()
    for ext, args, plan in planned:
        found = threads_flag(args.get("nvcc", []))
        flag = (
            Decided(found[0], f"extension {ext.name}'s nvcc flags ({found[1]!r})")
            if found is not None
            else None
        )
        settings = asked(os.environ, session.package, flag)
        for warning in settings.warnings:
            if warning not in warned:
                warned.add(warning)
                say(f"warning: {warning}")
        sources = [str(s) for s in getattr(ext, "sources", ())]
        work = Workload(
            cuda_sources=sum(s.endswith(CUDA_SOURCES) for s in sources),
            cxx_sources=sum(s.endswith(CXX_SOURCES) for s in sources),
            targets=device_compiles(plan.gencode),
        )
        runs = RunsAs(mode, mode_from, sharing)
        out[ext.name] = decided_parallelism(machine, work, settings, runs)
    return out


def parallel(cmd: Any, session: Session, planned: Any) -> dict[str, Choice]:
    choices = choose_parallelism(cmd, session, planned)
    for name, choice in choices.items():
        say(f"parallel: extension {name}: {choice.summary}: {choice.why}")
    session.parallel = {  # (the machine's free memory varies: it stays in the log)
        name: choice.record() for name, choice in choices.items()
    }
    return choices
