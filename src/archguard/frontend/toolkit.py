"""The CUDA toolkit every build system of a build sees: one root, given the names CMake,
scikit-build-core, setuptools and torch's own CMake files read.

An nvcc-only toolkit (a container with just the compiler, or one assembled from NVIDIA's
nvcc wheels) lacks the CUDA libraries torch's headers and many packages use (cuBLAS,
cuSPARSE, cuSOLVER...); torch's NVIDIA wheels have them. archguard's setuptools hook adds
them to its own compiles (``CPATH``, link names), but a CMake build looks for one toolkit
root holding ``bin/nvcc``, ``include/`` and ``lib64/`` (``FindCUDA``, ``FindCUDAToolkit``,
torch's ``Caffe2/public/cuda.cmake``). So the front-end assembles that root
(:func:`archguard.detect.cudalibs.assemble_root`, kept under ``<cache>/cuda-root/``) and
points every variable at it before the backend runs:

- ``CUDA_HOME``, ``CUDA_PATH``: setuptools, torch's ``cpp_extension``, ``FindCUDA``;
- ``CUDACXX``: CMake's CUDA compiler where a project enables CUDA itself;
- ``CUDAToolkit_ROOT``: ``find_package(CUDAToolkit)``;
- ``CMAKE_ARGS``: ``-DCMAKE_CUDA_COMPILER``, ``-DCUDAToolkit_ROOT`` and
  ``-DCUDA_TOOLKIT_ROOT_DIR`` before the caller's own (scikit-build-core, scikit-build and
  many ``setup.py`` files pass ``CMAKE_ARGS`` to CMake; the caller's later ``-D`` wins).
  ``SKBUILD_CMAKE_ARGS`` is left to the caller: scikit-build-core reads both, and each
  ``-D`` would be passed twice;
- ``PATH``: the root's ``bin/`` first (``FindCUDA`` and ``setup.py`` files that run
  ``nvcc`` by name).

With a complete toolkit nothing is assembled and the same variables name the toolkit.

The arches reach a CMake build through ``CUDAARCHS`` (:mod:`archguard.reports.text`), and
through the package's own variable where its CMake files read one (``$ENV{MYPKG_CUDA_ARCHS}``,
with a literal default): :func:`cmake_arches` sets it to the list in that default's spelling,
as for a ``setup.py``'s own variable, and refuses before anything compiles a build whose
CMake files force a literal list that no variable it sets can change.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path

from archguard.core.arch import ArchEntry
from archguard.core.resolve import Resolution
from archguard.detect.cudalibs import assemble_root
from archguard.detect.fetch import cache_root
from archguard.frontend.cmake import (
    CMakeFiles,
    ForcedLine,
    OwnVariable,
    forced_lines,
    own_variables,
)
from archguard.nvcc.flags import cmake_architectures, dropped_ptx, spelled_like

_CMAKE_ARCH = re.compile(r"([0-9]{2,3}[af]?)(-real|-virtual)?")
_FALSE = frozenset({"", "OFF", "FALSE", "NO", "N", "0", "IGNORE", "NOTFOUND"})


@dataclass(frozen=True)
class BuildToolkit:
    """The toolkit root of one build, and the variables that name it."""

    root: str
    variables: dict[str, str]
    assembled: dict[str, object] = field(default_factory=dict)  # ToolkitRoot.record()
    notes: tuple[str, ...] = ()
    cmake_args: tuple[str, ...] = ()  # the -D archguard put before the caller's CMAKE_ARGS

    def as_json(self) -> dict[str, object]:
        """What the record keeps: the root, what was linked into it, and the variables that
        name it (never the caller's PATH or CMAKE_ARGS, which are the machine's)."""
        named = {k: v for k, v in self.variables.items() if k not in ("PATH", "CMAKE_ARGS")}
        return {
            "root": self.root,
            "variables": named,
            "cmake_args": list(self.cmake_args),
            "assembled": self.assembled or None,
            "notes": list(self.notes),
        }


def build_toolkit(res: Resolution, environ: Mapping[str, str]) -> BuildToolkit | None:
    """The toolkit root of a build that compiles with ``res``'s nvcc (None without one),
    assembled with torch's NVIDIA wheels where the toolkit lacks what they have."""
    nvcc = res.toolkit.nvcc
    if not nvcc:
        return None
    home = str(Path(nvcc).parent.parent)
    made = assemble_root(home, res.toolkit.version.major, cache_root() / "cuda-root")
    root = str(made.root) if made else home
    compiler = str(Path(root, "bin", "nvcc"))
    notes: list[str] = []
    if made:
        notes.append(
            f"toolkit: {home} lacks what torch's NVIDIA wheels have ({_some(made.headers)}; "
            f"{_some(made.libraries)}): every build system gets one root, {root}, linking "
            "the toolkit's files and then the wheels' (none of the toolkit's shadowed)"
        )
    variables = {"CUDA_HOME": root, "CUDA_PATH": root, "CUDAToolkit_ROOT": root}
    defines = f"-DCUDAToolkit_ROOT={root} -DCUDA_TOOLKIT_ROOT_DIR={root}"
    if environ.get("CUDACXX"):  # CMake's own variable for its CUDA compiler: the caller's
        notes.append(
            f"toolkit: your CUDACXX={environ['CUDACXX']!r} wins (CMake's CUDA compiler is "
            "left to it)"
        )
    else:
        variables["CUDACXX"] = compiler
        defines = f"-DCMAKE_CUDA_COMPILER={compiler} {defines}"
    before = environ.get("CMAKE_ARGS", "").strip()
    given: tuple[str, ...] = ()
    if any(c.isspace() for c in root):  # setup.py files split CMAKE_ARGS on spaces
        notes.append(
            f"toolkit: {root} holds a space, so CMAKE_ARGS gets no -D for it (most setup.py "
            "files split CMAKE_ARGS on spaces); CUDACXX and CUDAToolkit_ROOT name it"
        )
    else:
        given = tuple(defines.split())
        variables["CMAKE_ARGS"] = f"{defines} {before}".strip()
    search = environ.get("PATH") or os.defpath  # an empty entry would be the working dir
    variables["PATH"] = os.pathsep.join([str(Path(root, "bin")), search])
    return BuildToolkit(root, variables, made.record() if made else {}, tuple(notes), given)


def _some(names: tuple[str, ...], shown: int = 4) -> str:
    """A few names of a long list, and how many more."""
    more = len(names) - shown
    return ", ".join(names[:shown]) + (f" and {more} more" if more > 0 else "")


@dataclass(frozen=True)
class CMakeArches:
    """What a package's CMake files do with the arches, for one list: the package's own arch
    variables set to it in their spelling, what was said, and the refusal's words where the
    files force arches no variable archguard sets can change ('' where none do)."""

    values: dict[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    refusal: str = ""


def cmake_arches(
    tree: Path,
    entries: Sequence[ArchEntry],
    environ: Mapping[str, str],
    given: Mapping[str, str],
    *,
    cmake_args: bool = True,
) -> CMakeArches:
    """For a build of ``tree`` with the list ``entries``: each arch variable its CMake files
    read from the environment with a literal default, set to the list in that default's
    spelling (the caller's ``environ`` wins; what archguard already ``given`` is kept), and
    the lines that force a literal list of other arches, as the refusal's words. Its own
    reading failing never stops the build: it is said, and the read-back still checks."""
    try:
        return _cmake_arches(CMakeFiles.read(tree), entries, environ, given, cmake_args)
    except Exception as exc:  # archguard's own reading failed: not a decision
        return CMakeArches(
            notes=(
                f"warning: archguard could not read its CMake files ({type(exc).__name__}: "
                f"{str(exc)[:200]}): none of their arch variables set, nothing checked before "
                "the build (the read-back checks the wheel)",
            )
        )


def _cmake_arches(
    model: CMakeFiles,
    entries: Sequence[ArchEntry],
    environ: Mapping[str, str],
    given: Mapping[str, str],
    cmake_args: bool = True,
) -> CMakeArches:
    """:func:`cmake_arches` on the files read; ``cmake_args``: the build passes CMAKE_ARGS to
    CMake (a cache entry's -D is given only then)."""
    values: dict[str, str] = {}
    notes: list[str] = []
    defined: list[str] = []  # cache entries given a -D
    for own in own_variables(model):
        name = own.name
        if own.cache:
            said = _cache_define(own, entries, environ, given, values) if cmake_args else ""
            if said:
                notes.append(said)
                defined.append(name)
            continue
        if name in given:
            continue
        if environ.get(name):
            notes.append(f"its CMake files read {name}, an arch variable: your {name} wins")
            continue
        spelled = spelled_like(own.default, entries, own.cmake)
        if spelled is None:
            continue
        values[name] = spelled
        # a bare 80 there is a cubin and PTX, as in CMAKE_CUDA_ARCHITECTURES
        said_ptx = own.cmake and _one_list(spelled) == cmake_architectures(entries)
        notes.append(
            f"its CMake files read {name}, an arch variable (default {own.default!r}, "
            f"{own.where}): set to the effective list in that spelling, {name}={spelled!r}"
            + (
                " (its spelling cannot say PTX: the PTX of the list is left out there; the "
                "read-back says what the build made of it)"
                if dropped_ptx(own.default, spelled, entries, own.cmake) and not said_ptx
                else ""
            )
        )
    wanted = _targets(cmake_architectures(entries).split(";"))
    kept = (  # neither OFF (no arch flags: a target without CUDA) nor the list itself
        f
        for f in forced_lines(model, {**environ, **given, **values}, defined)
        if f.arches is None
        or not (all(t.strip().upper() in _FALSE for t in f.arches) or _targets(f.arches) == wanted)
    )
    forced = list(islice(kept, 20))
    return CMakeArches(values, tuple(notes), _refusal(forced, entries) if forced else "")


def _cache_define(
    own: OwnVariable,
    entries: Sequence[ArchEntry],
    environ: Mapping[str, str],
    given: Mapping[str, str],
    values: dict[str, str],
) -> str:
    """A cache entry that reaches the arches (no environment reads it): ``-DNAME=list`` put
    first in ``CMAKE_ARGS`` (``values``; scikit-build-core and the setup.py files that run
    CMake pass it on), in its default's spelling; what the log says ('' where nothing is set:
    the caller's own -D wins, or the spelling cannot be told)."""
    name = own.name
    mine = environ.get("CMAKE_ARGS", "")
    if re.search(rf"(?:^|\s)-D\s*{re.escape(name)}(?::\w+)?=", mine):
        return f"its CMake files take {name}, a cache entry that reaches the arches: your -D wins"
    spelled = spelled_like(own.default, entries, own.cmake)
    if spelled is None or any(c.isspace() for c in spelled):
        return ""
    before = values.get("CMAKE_ARGS", given.get("CMAKE_ARGS", mine))
    values["CMAKE_ARGS"] = f"-D{name}={spelled} {before}".strip()
    return (
        f"its CMake files take {name}, a cache entry that reaches the arches (default "
        f"{own.default!r}, {own.where}): -D{name}={spelled} goes first in CMAKE_ARGS"
    )


def _targets(tokens: Iterable[str]) -> frozenset[str] | None:
    """``80;90-real`` as targets (sm_80 compute_80 sm_90); None for ``all``, ``native``..."""
    out = set()
    for token in tokens:
        m = _CMAKE_ARCH.fullmatch(token.strip())
        if m is None:
            return None
        if m[2] != "-virtual":
            out.add(f"sm_{m[1]}")
        if m[2] != "-real":
            out.add(f"compute_{m[1]}")
    return frozenset(out)


def _one_list(text: str) -> str:
    return ";".join(text.replace(",", ";").replace(" ", ";").split(";"))


def _refusal(forced: list[ForcedLine], entries: Sequence[ArchEntry]) -> str:
    """The refusal's words: each line, what it gives, and the fix."""
    wanted = cmake_architectures(entries)
    shown = "; ".join(
        f"{f.where()} (gives {';'.join(f.arches) if f.arches else 'arches of its own'})"
        for f in forced[:5]
    ) + (f"; and {len(forced) - 5} more" if len(forced) > 5 else "")
    reads = sorted({name for f in forced for name in f.reads()})
    fix = (
        f"set {' or '.join(reads)} (which that value reads from the environment, unset "
        f"here) to this cell's list, {wanted} in CMake's spelling; or "
        if reads
        else ""
    )
    return (
        "refused before building (no nvcc ran): its CMake files force CUDA arches that no "
        f"variable archguard sets can change, where this cell's list is {wanted}: {shown}. "
        f"Fix: {fix}patch those lines to follow ${{CMAKE_CUDA_ARCHITECTURES}} (archguard "
        "gives the list as CUDAARCHS) or guard them with if(NOT DEFINED "
        "CMAKE_CUDA_ARCHITECTURES); or build this cell with that list (ARCHGUARD_ARCH_LIST, "
        "or arch_list in [tool.archguard]); or skip the package for this cell"
    )
