"""Read the cubins and PTX inside a binary with a real ``cuobjdump``.

``cuobjdump --list-elf --list-ptx FILE`` names every embedded cubin and PTX, but prints an
``sm_100f`` cubin as ``...sm_100.cubin``; the header dump (``cuobjdump FILE``) keeps the
``f`` (``arch = sm_100f``). Both are read, in the same order, and must agree.

cuobjdump is found as ``--cuobjdump PATH``, then ``CUOBJDUMP``, then ``PATH``, then the CUDA
toolkit (``CUDA_HOME``/``CUDA_PATH``/``/usr/local/cuda``), then the ``nvidia-cuda-cuobjdump``
package in this Python's site-packages.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from archguard.core.arch import Arch, Targets
from archguard.errors import BinaryReadError, CuobjdumpNotFound

TIMEOUT_S = 300
_LIST = re.compile(r"^(ELF|PTX) file\s+[0-9]+:\s+\S*?\.(sm_[0-9]+[af]?)\.(cubin|ptx)\s*$")
_HEADER = re.compile(r"^Fatbin (elf|ptx) code:")
_ARCH = re.compile(r"^arch = (sm_[0-9]{2,3}[af]?)\s*$")
NO_DEVICE_CODE = "does not contain device code"


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def find_cuobjdump(
    explicit: str | None = None,
    environ: Mapping[str, str] | None = None,
    which: Callable[[str], str | None] = shutil.which,
    extra_dirs: Sequence[str] = (),
) -> str:
    """The cuobjdump to use (see the module docstring); ``extra_dirs`` are searched after
    the toolkit's ``bin/`` (the build passes the directory of the nvcc that compiles)."""
    env = os.environ if environ is None else environ
    if explicit:
        if not _executable(Path(explicit)):
            raise CuobjdumpNotFound(f"--cuobjdump {explicit} is not an executable file.")
        return explicit
    candidates: list[Path] = []
    if env.get("CUOBJDUMP"):
        candidates.append(Path(env["CUOBJDUMP"]))
    found = which("cuobjdump")
    if found:
        candidates.append(Path(found))
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if env.get(var):
            candidates.append(Path(env[var], "bin", "cuobjdump"))
    candidates += [Path(d, "cuobjdump") for d in extra_dirs]
    candidates.append(Path("/usr/local/cuda/bin/cuobjdump"))
    spec = importlib.util.find_spec("nvidia")
    for location in (spec.submodule_search_locations or []) if spec else []:
        candidates += sorted(Path(location).glob("cu*/bin/cuobjdump"), reverse=True)
    for candidate in candidates:
        if _executable(candidate):
            return str(candidate)
    raise CuobjdumpNotFound(
        "verify needs cuobjdump to read the cubins and PTX inside a binary, and none was "
        "found (looked at --cuobjdump, CUOBJDUMP, PATH, CUDA_HOME/CUDA_PATH/usr/local/cuda "
        "bin/, and the nvidia-cuda-cuobjdump package). Install it with "
        "`pip install nvidia-cuda-cuobjdump`, or pass --cuobjdump PATH."
    )


@dataclass(frozen=True)
class Embedded:
    """What one binary holds: cubins and PTX (``None`` when it has no device code)."""

    targets: Targets | None


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            argv, capture_output=True, text=True, timeout=TIMEOUT_S, check=False, shell=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BinaryReadError(f"`{' '.join(argv)}` could not run: {exc}") from None


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
        header = _HEADER.match(line)
        if header:
            kind = header[1]
            continue
        arch = _ARCH.match(line)
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
