"""Helpers shared by the setuptools hook and the build commands (standard library only:
the hook imports this module in every setuptools build of the environment)."""

from __future__ import annotations

import os
import sys
from typing import Any

_announced: set[str] = set()


def project_root(dist: Any) -> str:
    """Where the package's pyproject.toml lives: ``src_root``, setup.py's folder, or cwd."""
    root = getattr(dist, "src_root", None)
    if root:
        return str(root)
    script = getattr(dist, "script_name", None)
    if script and os.path.basename(script) == "setup.py" and os.path.isfile(script):
        return str(os.path.dirname(os.path.abspath(script)))
    return os.getcwd()


def is_torch_build_extension(cls: type) -> bool:
    """Is torch's BuildExtension in the MRO? (Checked by name: no torch import here.)"""
    return any(
        c.__name__ == "BuildExtension" and c.__module__ == "torch.utils.cpp_extension"
        for c in cls.__mro__
    )


def say(message: str) -> None:
    """One line of the build log, prefixed ``archguard:`` (stderr, so pip shows it)."""
    print(f"archguard: {message}", file=sys.stderr, flush=True)


def announce_once(key: str, message: str) -> None:
    """``say`` a message once per process (the hook runs several times per build)."""
    if key not in _announced:
        _announced.add(key)
        say(message)
