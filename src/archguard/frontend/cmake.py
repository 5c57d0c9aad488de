"""What a package's CMake files say about CUDA arches and CUDA itself, read from its tree
and its build log, for the failure's last line.

A ``set(CMAKE_CUDA_ARCHITECTURES ...)`` in a CMakeLists wins over ``-D`` and ``CUDAARCHS``,
a ``CUDA_ARCHITECTURES`` target property over both, and ``-gencode`` in ``CMAKE_CUDA_FLAGS``
or a target's options adds its own: the read-back then finds other arches than the list, or
nvcc refuses an arch the toolkit cannot emit. The failure names each such line
(``CMakeLists.txt:78: set(CMAKE_CUDA_ARCHITECTURES all-major)``), as it names a
``setup.py``'s hard-coded flags. A ``set()`` guarded by ``if(NOT DEFINED
CMAKE_CUDA_ARCHITECTURES)`` (or ``if(NOT CMAKE_CUDA_ARCHITECTURES)``) is a default that
``CUDAARCHS`` overrides, and is not named.
"""

from __future__ import annotations

import re
from pathlib import Path

_SET_LIST = re.compile(r"^\s*set\s*\(\s*CMAKE_CUDA_ARCHITECTURES\b", re.I)
_PROPERTY = re.compile(r"(?<![A-Za-z_])CUDA_ARCHITECTURES\b")  # the target property
_FLAGS = re.compile(
    r"(-gencode\b|--generate-code\b|arch=compute_\d|-arch[= ](?:sm|compute)_\d"
    r"|--gpu-architecture\b|--cuda-gpu-arch)"
)
_IF = re.compile(r"^\s*if\s*\((?P<cond>.*)", re.I)
_ENDIF = re.compile(r"^\s*endif\s*\(", re.I)
_ELSE = re.compile(r"^\s*(?:else|elseif)\s*\(", re.I)
_MESSAGE = re.compile(r"^\s*message\s*\(", re.I)  # says the arches, does not choose them
# a property set to the list the build was given: follows it, forces nothing
# (``(?:\s*\))?``: \s*\)?\s* split a run of blanks every way before failing at its end)
_FOLLOWS = re.compile(r"CUDA_ARCHITECTURES\s+\"?\$\{CMAKE_CUDA_ARCHITECTURES\}\"?(?:\s*\))?\s*$")
_DEFAULT_GUARD = re.compile(r"\bNOT\s+(?:DEFINED\s+)?CMAKE_CUDA_ARCHITECTURES\b", re.I)
_SKIP_DIRS = {".git", "build", "_skbuild", "third_party", "3rdparty", "external", "extern"}
_MAX_FILES = 200

# CMake's own words when it finds no CUDA (a build that then makes a wheel without CUDA code)
_NO_CUDA = re.compile(
    r"(No CMAKE_CUDA_COMPILER could be found\.?|Could NOT find CUDA\w*[^\n]*"
    r"|Failed to find nvcc\.?|CUDA (?:compiler |toolkit )?not found[^\n]*"
    r"|Looking for a CUDA compiler - NOTFOUND)",
    re.I,
)
_CMAKE_ERROR = re.compile(r"CMake Error at (?P<at>[^\s:]+:\d+) \((?P<what>[^()\n]*)\):")


def _cmake_files(tree: Path) -> list[Path]:
    out: list[Path] = []
    for path in sorted(tree.rglob("*")):
        if len(out) >= _MAX_FILES:
            break
        rel = path.relative_to(tree)
        if any(part in _SKIP_DIRS for part in rel.parts[:-1]):
            continue
        if path.is_file() and (path.name == "CMakeLists.txt" or path.suffix == ".cmake"):
            out.append(path)
    return out


def forced_arches(tree: Path) -> list[str]:
    """Each line of the tree's CMake files that chooses CUDA arches itself, as
    ``FILE:LINE: text`` (defaults guarded by ``if(NOT DEFINED ...)`` left out)."""
    found: list[str] = []
    for path in _cmake_files(tree):
        try:
            lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            continue
        guards: list[bool] = []  # for each open if(): is it a default's guard?
        for number, raw in enumerate(lines, 1):
            line = raw.split("#", 1)[0]
            opened = _IF.match(line)
            if opened:
                guards.append(bool(_DEFAULT_GUARD.search(opened["cond"])))
                continue
            if _ENDIF.match(line):
                if guards:
                    guards.pop()
                continue
            if _ELSE.match(line) and guards:  # the other branch of a default's guard forces
                guards[-1] = False
                continue
            if any(guards) or _MESSAGE.match(line) or _FOLLOWS.search(line):
                continue
            if _SET_LIST.match(line) or _PROPERTY.search(line) or _FLAGS.search(line):
                where = path.relative_to(tree).as_posix()
                found.append(f"{where}:{number}: {raw.strip()}")
    return found


def forced_note(tree: Path) -> str:
    """The failure's words for a tree whose CMake files choose arches ('' when none do)."""
    lines = forced_arches(tree)
    if not lines:
        return ""
    shown = "; ".join(lines[:5]) + (f"; and {len(lines) - 5} more" if len(lines) > 5 else "")
    return (
        f". Its CMake files choose arches themselves, over CUDAARCHS and -D: {shown}. Patch "
        "those lines to leave CMAKE_CUDA_ARCHITECTURES to the build (or guard them with "
        "if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES))"
    )


def no_cuda_said(log: str) -> str | None:
    """CMake's own words where it found no CUDA compiler or toolkit (None: it said none)."""
    found = _NO_CUDA.findall(log)
    return found[-1].strip() if found else None


def cmake_error(log: str) -> str | None:
    """CMake's last ``CMake Error at FILE:LINE (...)`` and the message under it."""
    found = list(_CMAKE_ERROR.finditer(log))
    if not found:
        return None
    last = found[-1]
    message: list[str] = []
    for line in log[last.end() :].splitlines()[1:16]:
        text = line.strip()
        if text.startswith(("Call Stack", "-- ", "CMake Error")) or len(message) == 3:
            break
        if text and text not in message:
            message.append(text)
    return f"{last['at']}: {' '.join(message)}" if message else last["at"]
