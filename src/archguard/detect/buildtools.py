"""The build tools a build's compiles run under, and what they can do: which ninja a build
runs (the first on ``PATH``, else a newer one beside the build's Python) and whether it
takes its jobs from a jobserver (ninja 1.13 and later), and whether the build's GNU make
reads a jobserver's FIFO (4.4 and later). Read from the tools' own ``--version``."""

from __future__ import annotations

import re
from pathlib import Path

from archguard.detect.tools import ToolFailed, executable, on_path, run

NINJA_CLIENT = (1, 13)  # the first ninja that takes its jobs from a jobserver


def tool_version(path: str | None, pattern: str) -> tuple[int, int] | None:
    """(major, minor) of what ``PATH --version`` prints, read by ``pattern`` (two groups)."""
    if path is None:
        return None
    try:
        out = run([path, "--version"]).stdout
    except ToolFailed:
        return None
    found = re.match(pattern, out)
    return (int(found.group(1)), int(found.group(2))) if found else None


def ninja_version(path: str | None) -> tuple[int, int] | None:
    """The version ``ninja --version`` prints (``1.13.2.git.kitware.jobserver-pipe-1``)."""
    return tool_version(path, r"\s*(\d+)\.(\d+)")


def pick_ninja(path: str, beside: Path) -> tuple[str | None, tuple[int, ...] | None]:
    """The ninja the build runs and its version: the first on ``PATH``, unless it reads no
    jobserver and the build's Python has one beside it that does (the ``ninja`` package)."""
    first = on_path("ninja", path)
    version = ninja_version(first)
    if version is not None and version >= NINJA_CLIENT:
        return first, version
    own = beside / "ninja"
    if executable(own):
        newer = ninja_version(str(own))
        if newer is not None and newer >= NINJA_CLIENT:
            return str(own), newer
    return first, version


def jobserver_ninja(path: str, beside: Path) -> tuple[str | None, str]:
    """The ninja a build runs (:func:`pick_ninja`) where it takes its jobs from a jobserver,
    else None; and in words, that ninja (``ninja 1.13 (/x/bin/ninja)``) or why there is none
    that reads a jobserver."""
    where, version = pick_ninja(path, beside)
    if version is None:
        return None, f"no ninja version read ({where or 'not on PATH'}) reads no jobserver"
    which = f"ninja {'.'.join(map(str, version))} ({where})"
    if version < NINJA_CLIENT:
        return None, f"{which} reads no jobserver (ninja 1.13 is the first that does)"
    return where, which


def make_reads_fifo(path: str) -> bool:
    """Whether the GNU make on ``path`` reads a FIFO's name in ``MAKEFLAGS`` (4.4 and later;
    make 4.3 stops: "internal error: invalid --jobserver-auth string", measured). No make:
    nothing to stop."""
    found = on_path("make", path)
    if found is None:
        return True
    version = tool_version(found, r"GNU Make (\d+)\.(\d+)")
    return version is not None and version >= (4, 4)
