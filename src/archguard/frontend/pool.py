"""A build whose backend is not setuptools (scikit-build-core, meson-python, ...) in the
jobserver's pool that ``archguard wheel`` was given (a farm run's, or its own for several
sources: ``ARCHGUARD_JOBSERVER=fifo:PATH``).

archguard's setuptools hook takes a setuptools build's tokens from inside the build
(:mod:`archguard._integration.parallel`). Another backend never runs the hook, so the
front-end joins the pool for it, from outside: it waits for the build's first token before
the backend runs and holds it to the build's end, and gives the build's ninja (1.13 or
later) the pool through a shim, put first on ``PATH`` (meson, and tools that run ``ninja``
by name) and named to CMake as its make program in ``CMAKE_ARGS`` (scikit-build-core runs
the ``ninja`` module's binary before ``PATH``'s; a ``-DCMAKE_MAKE_PROGRAM`` of the caller's
comes later and wins). ninja then takes a token per compile beyond its first.

Where ninja cannot read the pool (none 1.13 or later, or a generator other than Ninja), the
build runs as many compiles as the tokens free as it starts (``CMAKE_BUILD_PARALLEL_LEVEL``),
held to its end. A ``CMAKE_BUILD_PARALLEL_LEVEL`` the caller set is kept: CMake passes it
as ``-j``, and ninja given ``-j`` reads no pool (measured), which the build log says.
"""

from __future__ import annotations

import os
import shlex
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from archguard import jobserver
from archguard.detect.buildtools import NINJA_CLIENT, pick_ninja
from archguard.detect.machine import detect_machine
from archguard.nvcc.parallel import pool_tokens
from archguard.settings.config import jobserver_pool

LEVEL = "CMAKE_BUILD_PARALLEL_LEVEL"


def hook_joins(backend: str) -> bool:
    """Whether archguard's setuptools hook runs in a build of ``backend`` (and joins the pool
    itself): setuptools' ``build_meta`` and its ``__legacy__``."""
    return backend.startswith("setuptools.")


@contextmanager
def backend_tokens(
    backend: str, environ: Mapping[str, str], say: Callable[[str], None]
) -> Iterator[dict[str, str]]:
    """What the build of ``backend``, whose whole environment is ``environ``, adds to it to
    run in the pool ``ARCHGUARD_JOBSERVER=fifo:PATH`` names, while the context is open (its
    tokens held until then); nothing where the hook joins it itself or no pool is named."""
    on, fifo, own_token = jobserver_pool(environ)
    if hook_joins(backend) or not on or fifo is None or not own_token:
        yield {}
        return
    try:
        client = jobserver.Client(fifo)
    except OSError:
        say(f"parallel: the jobserver fifo:{fifo} cannot be opened: the backend's own choice")
        yield {}
        return
    started = time.monotonic()
    held = client.wait_one()
    waited = time.monotonic() - started
    first = f"its first token taken{f' after {waited:.0f} s' if waited >= 1 else ''}"
    try:
        width = pool_tokens(detect_machine())
        path = environ.get("PATH", "")
        ninja, version = pick_ninja(path, Path(sys.executable).parent)
        generator = environ.get("CMAKE_GENERATOR") or "Ninja"
        if environ.get(LEVEL):
            say(
                f"parallel: jobserver fifo:{fifo} ({first}): {LEVEL}={environ[LEVEL]} is "
                "set, which CMake passes as -j: ninja runs that many and ignores the jobserver"
            )
            yield {}
        elif "Ninja" in generator and version is not None and version >= NINJA_CLIENT:
            with tempfile.TemporaryDirectory(prefix="archguard-ninja-") as shim:
                script = jobserver.ninja_shim(
                    Path(shim), str(ninja), f"-j{width} {jobserver.AUTH}fifo:{fifo}"
                )
                say(
                    f"parallel: jobserver fifo:{fifo} ({first}, held by the build of "
                    f"{backend}): ninja {'.'.join(map(str, version))} ({ninja}) takes a "
                    "token per compile beyond it"
                )
                args = f"-DCMAKE_MAKE_PROGRAM={shlex.quote(str(script))}"
                yield {
                    "PATH": f"{shim}{os.pathsep}{path}",
                    "CMAKE_ARGS": f"{args} {environ.get('CMAKE_ARGS', '')}".strip(),
                }
        else:
            held += client.take(width - 1)
            which = (
                f"CMAKE_GENERATOR={generator} reads no jobserver"
                if "Ninja" not in generator
                else f"ninja {'.'.join(map(str, version))} ({ninja}) reads no jobserver (1.13 "
                "is the first that does)"
                if version
                else "no ninja found"
            )
            say(
                f"parallel: jobserver fifo:{fifo} ({first}): {which}: {LEVEL}={len(held)}, "
                "the tokens free as it starts"
            )
            yield {LEVEL: str(len(held))}
    finally:
        client.give(held)
        client.close()
