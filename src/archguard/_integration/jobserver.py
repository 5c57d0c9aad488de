"""The hook's jobserver (the protocol: :mod:`archguard.jobserver`): the tokens a setuptools
build's compiles take, from the start of its compiles to their end.

With the jobserver (``ARCHGUARD_JOBSERVER=0`` turns it off) a build's ninja runs with no
``-j`` and takes a token per compile; archguard's nvcc launcher gives each compile
``--threads`` of its own token plus the free ones. The jobserver is the one
``ARCHGUARD_JOBSERVER=fifo:PATH`` names (a farm run's, ``archguard wheel``'s) or the caller's
``MAKEFLAGS`` names (make 4.4), else the machine's (:func:`archguard.jobserver.machine_jobserver`
under archguard's cache, a token per core, memory-capped, shared with every build, farm run and
``archguard wheel`` there; one served for this build alone where the cache takes no FIFO), the
build taking its first token from it. ninja gets
it in ``MAKEFLAGS`` through a shim of its own; the build's environment only where its GNU
make reads a FIFO's name (4.4 and later: make 4.3 stops on it, measured). A ninja older than
1.13 reads no jobserver: archguard says so and the build keeps the static choice, within the
caller's jobserver by the tokens it can take.

A build whose compiles torch's ninja does not run (setuptools' compiler, or a CMake or make
step of the package's own that builds a source-less extension) joins it as a whole
(:func:`_own_steps`): its first token held to its end, and the jobserver passed to the tools
its setup.py may run, by what reads it: ``MAKEFLAGS`` for a make 4.4, the ninja shim first on
``PATH`` for a ninja 1.13 run by name (CMake's Ninja generator finds it there); where no ninja
reads it, a step's ``cmake --build`` runs ``CMAKE_BUILD_PARALLEL_LEVEL`` compiles, the tokens
free as the build starts, held to its end.
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

from archguard import jobserver, nvcc_steps
from archguard._integration.common import say
from archguard.detect.buildtools import jobserver_ninja, make_reads_fifo
from archguard.detect.fetch import machine_directory
from archguard.detect.machine import Machine, detect_machine
from archguard.detect.machine_jobserver import joined_machine, joined_words
from archguard.nvcc.parallel import CHOSEN, BuildMode, Choice, jobserver_width
from archguard.settings.config import ENV_JOBSERVER, JobserverSetting, jobserver_setting

LEVEL = "CMAKE_BUILD_PARALLEL_LEVEL"


@dataclass
class BuildJobserver:
    """What the jobserver gives a build: its variables (``ARCHGUARD_JOBSERVER``, ``PATH`` to
    the ninja shim, ``MAKEFLAGS`` where make reads it, ``PYTORCH_NVCC``,
    ``CMAKE_BUILD_PARALLEL_LEVEL`` where nothing else reads it), ``MAX_JOBS`` per extension
    where a static count stands, and the extensions whose ``--threads`` the launcher sets."""

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
def build_jobserver(  # noqa: PLR0913 - each a fact of this build
    choices: dict[str, Choice],
    variables: dict[str, str | None],
    shim: Path,
    machine: Machine | None = None,
    *,
    beside: Path | None = None,
    own_steps: bool = False,
) -> Iterator[BuildJobserver]:
    """The build's jobserver, from the start of its compiles to their end (one served here
    is removed then, and what was not given back is said). ``own_steps``: a step of the
    package's own (CMake, make) builds an extension with no sources."""
    ninja = {name: c for name, c in choices.items() if c.mode is BuildMode.NINJA}
    static = {name: str(c.jobs) for name, c in ninja.items() if c.jobs_chosen}
    setting = jobserver_setting(os.environ)
    outer = setting.fifo
    if not choices or not setting.on:
        if ninja:
            say(f"parallel: jobserver off ({ENV_JOBSERVER}): each build keeps its static share")
        yield BuildJobserver(jobs=static)
        return
    if outer is not None and jobserver.unreachable(outer) is not None:
        say(f"parallel: the jobserver fifo:{outer} cannot be opened: the static choice stands")
        yield BuildJobserver(jobs=static, variables={"MAKEFLAGS": None, ENV_JOBSERVER: None})
        return
    path = os.environ.get("PATH", "")
    machine = machine or detect_machine()
    where, ninja_words = jobserver_ninja(path, beside or Path(sys.executable).parent)
    if not ninja:
        build_path = variables.get("PATH") or path
        ninja_found = (where, ninja_words)
        with _own_steps(
            setting, machine, ninja_found, shim, (path, build_path), own_steps=own_steps
        ) as joined:
            yield joined
        return
    if where is None:
        with _fallback(static, setting, ninja_words) as joined:
            yield joined
        return
    with _joined(setting, machine) as (source, fifo, width):
        makeflags = jobserver.makeflags(fifo, width)
        joined = BuildJobserver(variables={ENV_JOBSERVER: f"fifo:{fifo}"})
        jobserver.ninja_shim(shim, where, makeflags)
        joined.variables["PATH"] = f"{shim}{os.pathsep}{variables.get('PATH') or path}"
        if make_reads_fifo(path):  # make 4.4 and later: its sub-builds take tokens too
            joined.variables["MAKEFLAGS"] = makeflags
        if static and "MAX_JOBS" in os.environ:  # one it ignored (MAX_JOBS=0): torch would
            joined.variables["MAX_JOBS"] = None  # pass -j 0, which ninja reads as no limit
        nvcc = _nvcc_command(variables)
        for name, choice in ninja.items():
            if not choice.jobs_chosen:  # MAX_JOBS, max_jobs: torch passes -j; ninja's count
                say(
                    f"parallel: extension {name}: {choice.jobs_from}: ninja runs that many "
                    "and ignores the jobserver"
                )
            elif choice.threads_from == CHOSEN and nvcc is not None:
                joined.launched.add(name)
        if joined.launched:
            launcher = f"{shlex.quote(sys.executable)} -I -S {shlex.quote(nvcc_steps.__file__)}"
            # archguard's own jobserver (every token one byte): its compiles take turns
            ours = outer is None or machine_directory() in Path(fifo).parents
            turns = f"{nvcc_steps.TURNS} " if ours else ""
            joined.variables["PYTORCH_NVCC"] = f"{launcher} {turns}{shlex.quote(fifo)} {nvcc}"
        say(
            f"parallel: jobserver {source}: {ninja_words} takes a token per compile"
            + (
                "; archguard's nvcc launcher gives each compile --threads 1 + the free tokens, "
                "at most its device compiles"
                if joined.launched
                else ""
            )
        )
        yield joined


@contextmanager
def _joined(setting: JobserverSetting, machine: Machine) -> Iterator[tuple[str, str, int]]:
    """The jobserver a build takes its tokens from: (in words, its FIFO, the jobs it stands
    for); a farm run's (no token held: the build takes its first itself, held to its end),
    a make's (which gave the build its first), or one served for the build (removed at its
    end; tokens not given back are said)."""
    outer = setting.fifo
    if outer is not None and not setting.token_held:
        # a farm run's jobserver: no token comes with the build (the job holds none while it
        # fetches, resolves, repairs), so the build takes the one its ninja runs on first
        client = jobserver.Client(outer)
        token, first = client.wait_first()
        try:
            whose = "machine's" if machine_directory() in Path(outer).parents else "farm run's"
            yield f"the {whose} (fifo:{outer}; {first})", outer, jobserver_width(machine)
        finally:
            client.give(token)
            client.close()
        return
    if outer is not None:  # make's: the build came with its token
        yield f"the caller's (fifo:{outer})", outer, jobserver_width(machine)
        return
    width = jobserver_width(machine)
    directory = machine_directory()
    with joined_machine(directory, width) as joined:
        if isinstance(joined, OSError):  # a file system without FIFOs: one for this build
            say(f"parallel: no machine jobserver under {directory} ({joined})")
            with _served(machine, width) as served:
                yield served
            return
        client = jobserver.Client(str(joined.path))
        token, first = client.wait_first()
        try:
            said = joined_words(joined, machine, "build")
            yield (
                f"the machine's ({said.how}: {said.tokens}, {said.cores}{said.recovered}; {first})",
                str(joined.path),
                joined.width,  # the machine's: the first user's width, whatever this asked
            )
        finally:
            client.give(token)
            client.close()


@contextmanager
def _served(machine: Machine, width: int) -> Iterator[tuple[str, str, int]]:
    """A jobserver for this build alone (ninja holds one implicit token: the FIFO the rest),
    removed at its end; tokens not given back are said."""
    with jobserver.serve(width) as server:
        yield (
            f"made for this build: {width} token{'s' if width != 1 else ''} ({machine.cores_from})",
            str(server.path),
            width,
        )
    if server.returned is not None and server.returned < server.tokens:
        lost = server.tokens - server.returned
        say(f"parallel: jobserver: {lost} of {server.tokens} tokens not given back")


@contextmanager
def _fallback(
    static: dict[str, str], setting: JobserverSetting, why: str
) -> Iterator[BuildJobserver]:
    """ninja reads no jobserver (``why``, in words): the static choice, within the caller's
    jobserver where there is one (as many compiles as the tokens free as it starts, held to
    the build's end; from a farm run's, the first waited for)."""
    outer = setting.fifo
    if outer is None or not static:
        say(f"parallel: {why}: each compile count stays archguard's static choice")
        yield BuildJobserver(jobs=static)
        return
    client = jobserver.Client(outer)
    got = b""
    try:
        got = b"" if setting.token_held else client.wait_one()
        got += client.take(max(int(j) for j in static.values()) - 1)
        count = max(1, len(got) + (1 if setting.token_held else 0))
        jobs = {name: str(min(int(j), count)) for name, j in static.items()}
        say(f"parallel: {why}: it runs MAX_JOBS={count}, the tokens the jobserver had free")
        yield BuildJobserver(jobs=jobs)
    finally:
        client.give(got)
        client.close()


@contextmanager
def _own_steps(  # noqa: PLR0913 - each a fact of this build
    setting: JobserverSetting,
    machine: Machine,
    ninja: tuple[str | None, str],
    shim: Path,
    path: tuple[str, str],
    *,
    own_steps: bool,
) -> Iterator[BuildJobserver]:
    """A build whose compiles torch's ninja does not run, in the jobserver as a whole: its
    first token held to its end; ``MAKEFLAGS`` for a make 4.4 it runs, the shim first on
    ``PATH`` for a ninja 1.13 (``ninja``: the one found, or None, and in words; ``path``: the
    ``PATH`` searched and the one the build runs with); where no ninja reads it and a step of
    its own builds (``own_steps``), ``CMAKE_BUILD_PARALLEL_LEVEL`` for its ``cmake --build``:
    the tokens free as it starts, held to its end (a level the caller set is kept)."""
    where, ninja_words = ninja
    searched, build_path = path
    with _joined(setting, machine) as (source, fifo, width):
        makeflags = jobserver.makeflags(fifo, width)
        joined = BuildJobserver(variables={ENV_JOBSERVER: f"fifo:{fifo}"})
        readers = []
        if where is not None:
            jobserver.ninja_shim(shim, where, makeflags)
            joined.variables["PATH"] = f"{shim}{os.pathsep}{build_path}"
            readers.append(f"{ninja_words} run by name")
        if make_reads_fifo(searched):  # make 4.4 and later (make 4.3 stops on a FIFO's name)
            joined.variables["MAKEFLAGS"] = makeflags
            readers.append("a make 4.4 (MAKEFLAGS)")
        said = (
            f"parallel: jobserver {source}: the build's compiles (setuptools' compiler, or a "
            "step of the package's own) hold a token; "
            + (
                f"{' and '.join(readers)} {'take' if len(readers) > 1 else 'takes'} a token per "
                "compile beyond it"
                if readers
                else "no make or ninja here reads a jobserver (make before 4.4, no ninja 1.13)"
            )
        )
        if where is not None or not own_steps:
            say(said)
            yield joined
            return
        if os.environ.get(LEVEL):
            say(f"{said}; {LEVEL}={os.environ[LEVEL]} is set: its cmake --build runs that many")
            yield joined
            return
        client = jobserver.Client(fifo)
        held = b""
        try:
            held = client.take(width - 1)
            joined.variables[LEVEL] = str(1 + len(held))
            say(f"{said}; its cmake --build runs {LEVEL}={1 + len(held)}, the tokens free now")
            yield joined
        finally:
            client.give(held)
            client.close()


def launched(choice: Choice, joined: BuildJobserver, name: str) -> Choice:
    """The choice as the build runs it: the launcher's threads where it sets them."""
    if name not in joined.launched:
        return choice
    return dataclasses.replace(
        choice, threads_from="archguard's nvcc launcher: 1 + the jobserver's free tokens"
    )
