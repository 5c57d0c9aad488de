"""Platforms: the Linux machine a build's torch (and so its wheel) is for. One type, one parser.

PyTorch ships CUDA wheels for two Linux machines: ``x86_64`` and ``aarch64`` (SBSA: GH200,
GB200/GB300, DGX Spark's GB10, Jetson Thor; ``manylinux_2_28_aarch64``, a CUDA build since
torch 2.11). The device code nvcc emits does not depend on the host, but what torch ships
does (its aarch64 build carries ``sm_110`` and no ``sm_75``/``sm_86``), so the platform is
an input of the torch facts, of the policy row a build takes and of a farm's cells.

Pure: :func:`host_platform` takes the machine name as an argument where a caller has one
(tests pass data in); it looks at :func:`platform.machine` only when given ``None``.
"""

from __future__ import annotations

import platform as _stdlib_platform
import sys
from typing import Literal, cast

from archguard.errors import ConfigError

Platform = Literal["x86_64", "aarch64"]
PLATFORMS: tuple[Platform, ...] = ("x86_64", "aarch64")
DEFAULT_PLATFORM: Platform = "x86_64"  # a torch_builds.yml row that names none

# Other spellings of the same machines (uname, Docker, Go, Apple): named by the error,
# never taken silently, so that one name is written everywhere.
_ALIASES = {
    "amd64": "x86_64",
    "x64": "x86_64",
    "x86-64": "x86_64",
    "arm64": "aarch64",
    "sbsa": "aarch64",
}

# ELF e_machine values (pyelftools' names) of the two platforms.
_ELF_MACHINES = {"EM_X86_64": "x86_64", "EM_AARCH64": "aarch64"}


def parse_platform(text: str, source: str = "--platform") -> Platform:
    """``x86_64`` or ``aarch64``; anything else one :class:`ConfigError` naming the fix."""
    value = text.strip()
    if value in PLATFORMS:
        return value
    alias = _ALIASES.get(value.lower())
    hint = (
        f" (write {alias!r}: archguard names platforms as wheel tags and uname -m do)"
        if alias
        else ""
    )
    raise ConfigError(
        f"{source}: {text!r} is not a platform PyTorch ships CUDA wheels for{hint}; "
        f"write one of {', '.join(PLATFORMS)}."
    )


def host_platform(machine: str | None = None) -> Platform | None:
    """This machine's platform (``uname -m``), or None where torch ships no CUDA for it (a
    machine other than these, or not Linux: a Mac's arm64 is no aarch64 CUDA host)."""
    if machine is None and not sys.platform.startswith("linux"):
        return None
    name = _stdlib_platform.machine() if machine is None else machine
    name = _ALIASES.get(name.lower(), name)
    return next((p for p in PLATFORMS if p == name), None)


def platform_or_host(text: str | None, source: str = "--platform") -> Platform:
    """The platform asked for, else the host's (else x86_64 on a host torch ships no CUDA for)."""
    if text:
        return parse_platform(text, source)
    return host_platform() or DEFAULT_PLATFORM


def platform_of_tag(tag: str) -> Platform | None:
    """A wheel's platform tag -> its machine: ``manylinux_2_28_aarch64``, ``linux_x86_64``,
    ``manylinux2014_aarch64`` -> ``aarch64``; ``any``, ``win_amd64``, macOS -> None."""
    if not (tag.startswith("linux_") or tag.startswith("manylinux")):
        return None
    for name in PLATFORMS:
        if tag.endswith("_" + name):
            return name
    return None


def platform_of_elf(machine: str) -> Platform | None:
    """An ELF header's e_machine as pyelftools names it (``EM_AARCH64``) -> the platform."""
    return cast("Platform | None", _ELF_MACHINES.get(machine))


def wheel_tag(platform: Platform, glibc: tuple[int, int] | None = (2, 28)) -> str:
    """The platform tag torch's own wheels carry there (``manylinux_2_28_aarch64``), or the
    plain ``linux_`` tag with ``glibc=None``."""
    if glibc is None:
        return f"linux_{platform}"
    return f"manylinux_{glibc[0]}_{glibc[1]}_{platform}"
