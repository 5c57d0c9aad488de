"""How a build's compiles share the cores: the parallel jobs and nvcc ``--threads`` chosen per
extension (:func:`archguard.nvcc.parallel.decided_parallelism`, which ``explain`` calls too),
and the jobserver the build's ninja and nvcc take their tokens from.

With the jobserver (:mod:`archguard.jobserver`; ``ARCHGUARD_JOBSERVER=0`` turns it off) a
build's ninja runs with no ``-j`` and takes a token per compile; archguard's nvcc launcher
gives each compile ``--threads`` of its own token plus the free ones. The pool is the one
``ARCHGUARD_JOBSERVER=fifo:PATH`` names (a farm run's) or the caller's ``MAKEFLAGS`` names
(make 4.4), else one made for this build with a token per core (memory-capped). ninja gets
it in ``MAKEFLAGS`` through a shim of its own; the build's environment only where its GNU
make reads a FIFO's name (4.4 and later: make 4.3 stops on it, measured). A ninja older than
1.13 reads no pool: archguard says so and the build keeps the static choice, within the
caller's pool by the tokens it can take.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from archguard import jobserver
from archguard._integration.common import is_torch_build_extension, say
from archguard._integration.session import Session
from archguard.detect.buildtools import make_reads_fifo, pool_ninja
from archguard.detect.machine import Machine, detect_machine
from archguard.detect.sources import CUDA_SOURCES, CXX_SOURCES
from archguard.nvcc.flags import threads_flag
from archguard.nvcc.parallel import (
    CHOSEN,
    BuildMode,
    Choice,
    Decided,
    RunsAs,
    Workload,
    asked,
    decided_parallelism,
    device_compiles,
    pool_tokens,
)
from archguard.settings.config import ENV_JOBSERVER, jobserver_pool


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


@dataclass
class Tokens:
    """What the jobserver gives a build: its variables (``ARCHGUARD_JOBSERVER``, ``PATH`` to
    the ninja shim, ``MAKEFLAGS`` where make reads it, ``PYTORCH_NVCC``),
    ``MAX_JOBS`` per extension where a static count stands, and the extensions whose
    ``--threads`` the launcher sets."""

    variables: dict[str, str | None] = field(default_factory=dict)
    jobs: dict[str, str] = field(default_factory=dict)
    launched: set[str] = field(default_factory=set)


def _nvcc_command(variables: dict[str, str | None]) -> str | None:
    """What torch's ninja file runs for nvcc: ``PYTORCH_NVCC`` (archguard's cache, or the
    caller's), else ``CUDA_HOME/bin/nvcc`` as torch found it."""
    wrapped = variables.get("PYTORCH_NVCC") or os.environ.get("PYTORCH_NVCC")
    if wrapped:
        return wrapped
    extension = sys.modules.get("torch.utils.cpp_extension")
    home = getattr(extension, "CUDA_HOME", None)
    return shlex.quote(str(Path(home, "bin", "nvcc"))) if home else None


@contextmanager
def build_tokens(
    choices: dict[str, Choice],
    variables: dict[str, str | None],
    shim: Path,
    machine: Machine | None = None,
    *,
    beside: Path | None = None,
) -> Iterator[Tokens]:
    """The build's jobserver, from the start of its compiles to their end (a pool made here
    is removed then, and what was not given back is said)."""
    ninja = {name: c for name, c in choices.items() if c.mode is BuildMode.NINJA}
    static = {name: str(c.jobs) for name, c in ninja.items() if c.jobs_chosen}
    on, outer, own_token = jobserver_pool(os.environ)
    if not ninja or not on:
        if ninja:
            say(f"parallel: jobserver off ({ENV_JOBSERVER}): each build keeps its static share")
        yield Tokens(jobs=static)
        return
    if outer is not None and jobserver.unreachable(outer) is not None:
        say(f"parallel: the jobserver fifo:{outer} cannot be opened: the static choice stands")
        yield Tokens(jobs=static, variables={"MAKEFLAGS": None, ENV_JOBSERVER: None})
        return
    path = os.environ.get("PATH", "")
    where, ninja_words = pool_ninja(path, beside or Path(sys.executable).parent)
    if where is None:
        with _fallback(static, outer, ninja_words, own_token=own_token) as tokens:
            yield tokens
        return
    with _pool(outer, machine or detect_machine(), own_token) as (source, fifo, width):
        makeflags = jobserver.makeflags(fifo, width)
        tokens = Tokens(variables={ENV_JOBSERVER: f"fifo:{fifo}"})
        jobserver.ninja_shim(shim, where, makeflags)
        tokens.variables["PATH"] = f"{shim}{os.pathsep}{variables.get('PATH') or path}"
        if make_reads_fifo(path):  # make 4.4 and later: its sub-builds take tokens too
            tokens.variables["MAKEFLAGS"] = makeflags
        if static and "MAX_JOBS" in os.environ:  # one it ignored (MAX_JOBS=0): torch would
            tokens.variables["MAX_JOBS"] = None  # pass -j 0, which ninja reads as no limit
        nvcc = _nvcc_command(variables)
        for name, choice in ninja.items():
            if not choice.jobs_chosen:  # MAX_JOBS, max_jobs: torch passes -j; ninja's count
                say(
                    f"parallel: extension {name}: {choice.jobs_from}: ninja runs that many "
                    "and ignores the jobserver"
                )
            elif choice.threads_from == CHOSEN and nvcc is not None:
                tokens.launched.add(name)
        if tokens.launched:
            launcher = f"{shlex.quote(sys.executable)} -I -S {shlex.quote(jobserver.__file__)}"
            tokens.variables["PYTORCH_NVCC"] = f"{launcher} {shlex.quote(fifo)} {nvcc}"
        say(
            f"parallel: jobserver {source}: {ninja_words} takes a token per compile"
            + (
                "; archguard's nvcc launcher gives each compile --threads 1 + the free tokens, "
                "at most its device compiles"
                if tokens.launched
                else ""
            )
        )
        yield tokens


@contextmanager
def _pool(outer: str | None, machine: Machine, own_token: bool) -> Iterator[tuple[str, str, int]]:
    """The pool a build takes its tokens from: (in words, its FIFO, the jobs it stands for);
    a farm run's (``own_token``: the build takes its first token itself, held to its end),
    a make's (which gave the build its first), or one made for the build (removed at its
    end; tokens not given back are said)."""
    if outer is not None and own_token:
        # a farm run's pool: no token comes with the build (the job holds none while it
        # fetches, resolves, repairs), so the build takes the one its ninja runs on first
        client = jobserver.Client(outer)
        token, first = client.wait_first()
        try:
            yield f"the farm run's (fifo:{outer}; {first})", outer, pool_tokens(machine)
        finally:
            client.give(token)
            client.close()
        return
    if outer is not None:  # make's: the build came with its token
        yield f"the caller's (fifo:{outer})", outer, pool_tokens(machine)
        return
    width = pool_tokens(machine)  # ninja holds one implicit token: the FIFO holds the rest
    with jobserver.own_pool(width) as pool:
        yield (
            f"made for this build: {width} token{'s' if width != 1 else ''} ({machine.cores_from})",
            str(pool.path),
            width,
        )
    if pool.returned is not None and pool.returned < pool.tokens:
        lost = pool.tokens - pool.returned
        say(f"parallel: jobserver: {lost} of {pool.tokens} tokens not given back")


@contextmanager
def _fallback(
    static: dict[str, str], outer: str | None, why: str, *, own_token: bool = False
) -> Iterator[Tokens]:
    """ninja reads no jobserver (``why``, in words): the static choice, within the caller's
    pool where there is one (as many compiles as the tokens free as it starts, held to the
    build's end; from a farm run's pool, the first waited for)."""
    if outer is None or not static:
        say(f"parallel: {why}: each compile count stays archguard's static choice")
        yield Tokens(jobs=static)
        return
    client = jobserver.Client(outer)
    got = b""
    try:
        got = client.wait_one() if own_token else b""
        got += client.take(max(int(j) for j in static.values()) - 1)
        count = max(1, len(got) + (0 if own_token else 1))
        jobs = {name: str(min(int(j), count)) for name, j in static.items()}
        say(f"parallel: {why}: it runs MAX_JOBS={count}, the tokens the pool had free")
        yield Tokens(jobs=jobs)
    finally:
        client.give(got)
        client.close()


def parallel(cmd: Any, session: Session, planned: Any) -> dict[str, Choice]:
    choices = choose_parallelism(cmd, session, planned)
    for name, choice in choices.items():
        say(f"parallel: extension {name}: {choice.summary}: {choice.why}")
    session.parallel = {  # (the machine's free memory varies: it stays in the log)
        name: choice.record() for name, choice in choices.items()
    }
    return choices


def launched(choice: Choice, tokens: Tokens, name: str) -> Choice:
    """The choice as the build runs it: the launcher's threads where it sets them."""
    if name not in tokens.launched:
        return choice
    return dataclasses.replace(
        choice, threads_from="archguard's nvcc launcher: 1 + the jobserver's free tokens"
    )
