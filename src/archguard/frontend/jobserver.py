"""A build whose backend is not setuptools (scikit-build-core, meson-python, ...) in the
jobserver that ``archguard wheel`` was given (a farm run's, or its own for several sources:
``ARCHGUARD_JOBSERVER=fifo:PATH``); the protocol is :mod:`archguard.jobserver`.

archguard's setuptools hook takes a setuptools build's tokens from inside the build
(:mod:`archguard._integration.jobserver`). Another backend never runs the hook, so the
front-end joins the jobserver for it, from outside: it waits for the build's first token
before the backend runs, holds it to the build's end, and tells the build so
(``ARCHGUARD_JOBSERVER=held:PATH``: a setuptools build behind another backend's name, whose
hook does run, then takes no first token of its own). The build's ninja (1.13 or later) gets
the jobserver through a shim put first on ``PATH`` (meson, and tools that run ``ninja`` by name);
scikit-build-core runs the ``ninja`` module's binary before ``PATH``'s, so the shim is also
named to CMake as ``-DCMAKE_MAKE_PROGRAM`` at the front of ``CMAKE_ARGS``, but only where
nothing the front-end can see chooses a generator or a make program (``CMAKE_GENERATOR``
other than Ninja, ``-G`` or ``CMAKE_MAKE_PROGRAM`` in ``CMAKE_ARGS``, ``SKBUILD_CMAKE_ARGS``,
``SKBUILD_CMAKE_DEFINE``, the project's ``[tool.scikit-build]`` or pip's
``--config-settings``): a Makefiles build given ninja as its make program would fail.

Where the shim cannot be used (no ninja 1.13, a generator chosen, a shim that does not run:
a ``noexec`` temporary directory), the build runs as many compiles as the tokens free as it
starts (``CMAKE_BUILD_PARALLEL_LEVEL``), held to its end. A ``CMAKE_BUILD_PARALLEL_LEVEL``
the caller set is kept: CMake passes it as ``-j``, and ninja given ``-j`` reads no jobserver
(measured); the build log says so.
"""

from __future__ import annotations

import os
import shlex
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from archguard import jobserver
from archguard.detect.buildtools import jobserver_ninja, ninja_version
from archguard.detect.machine import detect_machine
from archguard.nvcc.parallel import jobserver_width
from archguard.settings.config import ENV_JOBSERVER, HELD, jobserver_setting, read_toml

LEVEL = "CMAKE_BUILD_PARALLEL_LEVEL"
SKBUILD = "scikit_build_core.build"
_CHOOSERS = ("-G", "CMAKE_GENERATOR", "CMAKE_MAKE_PROGRAM")  # what picks the build tool


def hook_joins(backend: str) -> bool:
    """Whether archguard's setuptools hook runs in a build of ``backend`` and joins the
    jobserver itself (its first token as its compiles start): setuptools' ``build_meta`` and its
    ``__legacy__``."""
    return backend.startswith("setuptools.")


def generator_chosen(
    environ: Mapping[str, str], source: Path, pip_args: Sequence[str] = ()
) -> str | None:
    """Where something other than scikit-build-core's own choice (Ninja, where it finds one)
    picks the build's generator or make program, in words; None: nowhere the front-end can
    see. Any mention counts: a wrong "chosen" costs the jobserver's ninja, a wrong "not chosen"
    the build."""
    generator = environ.get("CMAKE_GENERATOR", "")
    if generator and "Ninja" not in generator:
        return f"CMAKE_GENERATOR={generator}"
    for name in ("CMAKE_ARGS", "SKBUILD_CMAKE_ARGS", "SKBUILD_CMAKE_DEFINE"):
        if any(c in environ.get(name, "") for c in _CHOOSERS):
            return name
    if any(c in arg or "cmake." in arg for arg in pip_args for c in _CHOOSERS):
        return "pip's --config-settings"
    pyproject = source / "pyproject.toml"
    if pyproject.is_file():
        tool = read_toml(pyproject).get("tool")
        table = tool.get("scikit-build") if isinstance(tool, dict) else None
        if table is not None and any(c in repr(table) for c in _CHOOSERS):
            return f"{pyproject} [tool.scikit-build]"
    return None


@contextmanager
def backend_jobserver(
    backend: str,
    environ: Mapping[str, str],
    say: Callable[[str], None],
    *,
    source: Path,
    pip_args: Sequence[str] = (),
) -> Iterator[dict[str, str]]:
    """What the build of ``source`` with ``backend``, whose whole environment is ``environ``,
    adds to it to run in the jobserver ``ARCHGUARD_JOBSERVER=fifo:PATH`` names, while the
    context is open (its tokens held until then); nothing where the hook joins the jobserver
    itself or none is named."""
    setting = jobserver_setting(environ)
    fifo = setting.fifo
    if hook_joins(backend) or not setting.on or fifo is None or setting.token_held:
        yield {}
        return
    try:
        client = jobserver.Client(fifo)
    except OSError:
        say(f"parallel: the jobserver fifo:{fifo} cannot be opened: the backend's own choice")
        yield {}
        return
    held = b""
    try:
        held, first = client.wait_first()
        width = jobserver_width(detect_machine())
        joined = {ENV_JOBSERVER: f"{HELD}{fifo}"}
        with tempfile.TemporaryDirectory(prefix="archguard-ninja-") as shim:
            ninja = _shim(Path(shim), jobserver.makeflags(fifo, width), environ.get("PATH", ""))
            chosen = generator_chosen(environ, source, pip_args) if backend == SKBUILD else None
            if environ.get(LEVEL):
                say(
                    f"parallel: jobserver fifo:{fifo} ({first}): {LEVEL}={environ[LEVEL]} is "
                    "set, which CMake passes as -j: ninja runs that many, not the jobserver's"
                )
            elif isinstance(ninja, Path) and chosen is None:
                say(
                    f"parallel: jobserver fifo:{fifo} ({first}, held by the build of "
                    f"{backend}): ninja takes a token per compile beyond it"
                )
                joined["PATH"] = os.pathsep.join(p for p in (shim, environ.get("PATH", "")) if p)
                if backend == SKBUILD:  # the caller's CMAKE_ARGS after, as they were
                    mine = f"-DCMAKE_MAKE_PROGRAM={shlex.quote(str(ninja))}"
                    theirs = environ.get("CMAKE_ARGS", "")
                    joined["CMAKE_ARGS"] = f"{mine} {theirs}" if theirs else mine
            else:
                held += client.take(width - 1)
                why = f"the generator is chosen ({chosen})" if chosen else str(ninja)
                say(
                    f"parallel: jobserver fifo:{fifo} ({first}): {why}: {LEVEL}={len(held)}, "
                    "the tokens free as it starts"
                )
                joined[LEVEL] = str(len(held))
            yield joined
    finally:
        client.give(held)
        client.close()


def _shim(directory: Path, makeflags: str, path: str) -> Path | str:
    """The shim in ``directory`` that runs a ninja 1.13 with the jobserver ``makeflags``
    names, checked to run; else why there is none, in words."""
    ninja, words = jobserver_ninja(path, Path(sys.executable).parent)
    if ninja is None:
        return words
    script = jobserver.ninja_shim(directory, ninja, makeflags)
    if ninja_version(str(script)) is None:  # a temporary directory mounted noexec
        return f"the ninja shim in {directory} does not run"
    return script
