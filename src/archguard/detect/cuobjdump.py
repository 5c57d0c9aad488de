"""Read the cubins and PTX inside a binary with a real ``cuobjdump``.

``cuobjdump --list-elf --list-ptx FILE`` names every embedded cubin and PTX, but prints an
``sm_100f`` cubin as ``...sm_100.cubin``; the header dump (``cuobjdump FILE``) keeps the
``f`` (``arch = sm_100f``). Both are read, in the same order, and must agree.

cuobjdump is found as ``--cuobjdump PATH``, else in :mod:`archguard.detect.tools`' one search
order.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from archguard.core.arch import Arch, Targets
from archguard.detect.tools import CUOBJDUMP, READ_TIMEOUT_S, executable, run
from archguard.errors import BinaryReadError, CuobjdumpNotFound

_LIST = re.compile(r"^(ELF|PTX) file\s+[0-9]+:\s+\S*?\.(sm_[0-9]+[af]?)\.(cubin|ptx)\s*$")
# The header of each embedded image in plain `cuobjdump FILE` / `-sass` / `-ptx` output, and
# its arch line (the one place these formats are read; detect/sass.py uses them too).
HEADER = re.compile(r"^Fatbin (elf|ptx) code:")
ARCH_LINE = re.compile(r"^arch = (sm_[0-9]{2,3}[af]?)\s*$")
NO_DEVICE_CODE = "does not contain device code"


def find_cuobjdump(
    explicit: str | None = None,
    environ: Mapping[str, str] | None = None,
    which: Callable[[str], str | None] | None = None,
    extra_dirs: Sequence[str] = (),
    *,
    needed_by: str,
) -> str:
    """The cuobjdump to use: ``explicit`` (``--cuobjdump PATH``), else the one search order
    of :mod:`archguard.detect.tools`; ``extra_dirs``: beside the nvcc that compiles.
    ``needed_by``: what asks for it and why, as the error names it ("verify", "probe-torch")."""
    if explicit:
        if not executable(Path(explicit)):
            raise CuobjdumpNotFound(
                f"{needed_by} reads binaries with cuobjdump, and --cuobjdump {explicit} is not "
                "an executable file; give the path of a cuobjdump, or drop --cuobjdump to let "
                f"archguard look ({CUOBJDUMP.order})."
            )
        return explicit
    found = CUOBJDUMP.find(environ, extra_dirs, which)
    if found is not None:
        return found
    raise CuobjdumpNotFound(
        f"{needed_by} needs cuobjdump to read the cubins and PTX inside a binary, and none "
        f"was found (looked at --cuobjdump, {CUOBJDUMP.order}). Install it with "
        f"`pip install {CUOBJDUMP.package}`, or pass --cuobjdump PATH."
    )


@dataclass(frozen=True)
class Embedded:
    """What one binary holds: cubins and PTX (``None`` when it has no device code)."""

    targets: Targets | None


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return run(argv, BinaryReadError, READ_TIMEOUT_S)


def parse_listing(text: str) -> list[tuple[str, str]]:
    """``--list-elf --list-ptx`` output -> [(kind 'elf'|'ptx', 'sm_XY')]."""
    out = []
    for line in text.splitlines():
        match = _LIST.match(line.strip())
        if match:
            out.append((match[1].lower(), match[2]))
    return out


def parse_headers(text: str) -> list[tuple[str, Arch]]:
    """Plain ``cuobjdump FILE`` output -> [(kind, arch with its a/f suffix)]."""
    out: list[tuple[str, Arch]] = []
    kind: str | None = None
    for raw in text.splitlines():
        line = raw.strip()
        header = HEADER.match(line)
        if header:
            kind = header[1]
            continue
        arch = ARCH_LINE.match(line)
        if arch and kind:
            out.append((kind, Arch.from_target(arch[1])))
            kind = None
    return out


def combine(listing: list[tuple[str, str]], headers: list[tuple[str, Arch]], where: str) -> Targets:
    """Check both views agree entry by entry; the headers supply the f suffix."""
    entries = combine_entries(listing, headers, where)
    cubins = frozenset(a for k, a in entries if k == "elf")
    ptx = frozenset(a for k, a in entries if k == "ptx")
    return Targets(cubins, ptx)


def combine_entries(
    listing: list[tuple[str, str]], headers: list[tuple[str, Arch]], where: str
) -> list[tuple[str, Arch]]:
    """Every embedded image, in order, as (kind 'elf'|'ptx', arch with its a/f suffix)."""
    if len(listing) != len(headers) or any(
        lk != hk or name.removesuffix("f") != arch.sm.removesuffix("f")
        for (lk, name), (hk, arch) in zip(listing, headers, strict=True)
    ):
        raise BinaryReadError(
            f"cuobjdump's listing and header dump of {where} disagree ({len(listing)} vs "
            f"{len(headers)} entries); archguard will not guess which is right."
        )
    return headers


def read_entries(path: Path, cuobjdump: str) -> list[tuple[str, Arch]] | None:
    """Every image embedded in a binary (kind, arch), or None when it has no device code."""
    listed = _run([cuobjdump, "--list-elf", "--list-ptx", str(path)])
    if NO_DEVICE_CODE in listed.stderr:
        return None
    if listed.returncode != 0 and not parse_listing(listed.stdout):
        raise BinaryReadError(
            f"cuobjdump could not read {path}: {(listed.stderr or listed.stdout).strip()[:300]}"
        )
    headers = _run([cuobjdump, str(path)])
    return combine_entries(parse_listing(listed.stdout), parse_headers(headers.stdout), str(path))


def read_binary(path: Path, cuobjdump: str) -> Embedded:
    entries = read_entries(path, cuobjdump)
    if entries is None:
        return Embedded(None)
    cubins = frozenset(a for k, a in entries if k == "elf")
    ptx = frozenset(a for k, a in entries if k == "ptx")
    return Embedded(Targets(cubins, ptx))
